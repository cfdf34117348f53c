// TEST-ONLY stand-in for CANN's acl/acl.h: what the NPU sources include it for is in acl_rt.h here.
#pragma once

#include "acl/acl_rt.h"
