// TEST-ONLY: the objects of the fake CANN's acl_op (single-operator) route, shared by libascendcl.so (runtime.cpp
// creates and fills them through the ACL descriptor API torch_npu's OpCommand calls) and libopapi.so
// (opapi/acl_op.cpp reads them to run the operator). No acl header here: aclDataType, aclFormat and aclMemType are
// plain integers with CANN's values, so libopapi.so needs none of CANN's headers. Both libraries are compiled with
// the same flags (build.py), so the standard-library members have one layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fake_acl {

inline constexpr int32_t kUndefined = -1;  // ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED: an absent optional input

// One aclopSetAttr* value. Bool, Int and DataType use `i`; ListBool, ListInt and ListDataType use `ints`.
enum class AttrKind { Bool, Int, Float, String, DataType, ListBool, ListInt, ListFloat, ListString, ListDataType,
                      ListListInt };

struct AttrValue {
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<std::vector<int64_t>> lists;
};

}  // namespace fake_acl

// aclCreateTensorDesc sets the original shape and format (torch_npu: the tensor's base sizes and origin format),
// aclSetTensorFormat / aclSetTensorShape (and their deprecated aliases aclSetTensorStorage*) the storage ones, which
// are what a kernel reads from the data buffer; unset, the storage ones are the original ones.
struct aclTensorDesc {
  int32_t dtype = fake_acl::kUndefined;
  int32_t format = fake_acl::kUndefined;
  std::vector<int64_t> dims;
  bool has_storage_format = false, has_storage_dims = false;
  int32_t storage_format = fake_acl::kUndefined;
  std::vector<int64_t> storage_dims;
  int32_t placement = 0;  // aclMemType: 0 device, 1 host, 2 host (compile independent)
  std::string name;
  bool has_const = false;  // aclSetTensorConst: the data travels in the descriptor (a copy)
  std::vector<unsigned char> const_data;
  std::vector<std::array<int64_t, 2>> shape_range;

  int32_t kernel_format() const { return has_storage_format ? storage_format : format; }
  const std::vector<int64_t>& kernel_dims() const { return has_storage_dims ? storage_dims : dims; }
};

struct aclDataBuffer {
  void* data = nullptr;
  size_t size = 0;  // bytes
};

struct aclopAttr {
  std::map<std::string, fake_acl::AttrValue> values;
};

// libopapi.so's acl_op entry point (opapi/acl_op.cpp), which runtime.cpp's aclopCompileAndExecute(V2) forward to.
// Returns an aclError; on a refusal the reason is the one aclGetRecentErrMsg reports.
extern "C" int fake_acl_op_execute(const char* op_type, int num_inputs, const aclTensorDesc* const inputs[],
                                   const aclDataBuffer* const input_buffers[], int num_outputs,
                                   const aclTensorDesc* const outputs[], aclDataBuffer* const output_buffers[],
                                   const aclopAttr* attr);
