// TEST-ONLY stand-in for CANN's acl/acl_rt.h (libascendcl): the two functions the NPU sources use, with the real
// declarations (acl_base_rt.h / acl_rt.h of torch_npu 2.13's bundled CANN headers). Defined in
// tests/npu_stub/torch_npu_standin.cpp: the SoC name comes from $NPU_FAKE_SOC (default "Ascend910B3", an
// Atlas A2), the error message is the stand-in aclnn's last rejection reason.
#pragma once

extern "C" {
const char* aclrtGetSocName();
const char* aclGetRecentErrMsg();
}
