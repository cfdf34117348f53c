// The fake ACL runtime's internals shared by its sources (runtime.cpp, acl_op_route.cpp), both compiled into
// libascendcl.so: not ACL API.
#pragma once

#include <cstdint>

namespace fake_rt {
// Adds n to the test counter `name` (fake_cann_count reads it).
void count(const char* name, int64_t n = 1);
}  // namespace fake_rt
