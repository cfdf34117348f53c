// TEST-ONLY acl_op (TBE single-operator) kernels of the fake CANN, part of libopapi.so: libascendcl.so's
// aclopCompileAndExecute(V2) forwards here (runtime.cpp) with the descriptors, data buffers and attributes that
// torch_npu's OpCommand built (../acl_op_desc.h). Each operand is read as a dense row-major tensor of its descriptor's
// storage shape and dtype at its data buffer's address (a host-placed input too: device memory is host memory here;
// a const input from the descriptor's copy), the op is computed by CPU ATen and written into the output buffers.
//
// Modelled: the op types torch_npu 2.6 / 2.7 send here on the Megatron / MindSpeed GPT step (`~mask`, `a & b` on bool
// tensors: op-plugin's DO_COMPATIBILITY takes acl_op where the aclnn operator is missing, jit compile on always):
//   LogicalNot (x) -> y; LogicalAnd, LogicalOr (x1, x2) -> y with x1, x2 broadcast. The TBE kernels take bool only
//   (op-plugin casts to bool first).
//   Identity (x) -> y: torch_npu's format cast on this route (FormatCastKernelNpu.cpp, format_cast_impl_out_npu:
//   an Identity whose input and output descriptors carry different storage formats, the TransData GE inserts).
//   The only op here that reads and writes private formats (FRACTAL_NZ, NC1HWC0: formats.h): y's logical elements
//   are x's, its padding zero.
// Refused as CANN does: an op type with no kernel here ACL_ERROR_OP_NOT_FOUND; a wrong number of inputs or outputs
// ACL_ERROR_OP_INPUT_NOT_MATCH / ACL_ERROR_OP_OUTPUT_NOT_MATCH; a dtype the kernel lacks
// ACL_ERROR_UNSUPPORTED_DATA_TYPE; a private storage format anywhere but Identity ACL_ERROR_FORMAT_NOT_MATCH; a data buffer smaller than its storage shape, or an output shape the op does not give,
// ACL_ERROR_INVALID_PARAM. The reason is what aclGetRecentErrMsg then returns.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../acl_op_desc.h"
#include "aten_dtypes.h"
#include "fake_opapi.h"
#include "formats.h"

namespace fake {
namespace {

// aclError values (acl_base_rt.h)
constexpr int kAclOk = 0;
constexpr int kAclInvalidParam = 100000;
constexpr int kAclInputNotMatch = 100021;
constexpr int kAclOutputNotMatch = 100022;
constexpr int kAclOpNotFound = 100024;
constexpr int kAclUnsupportedDataType = 100026;
constexpr int kAclFormatNotMatch = 100027;
constexpr int kAclInternal = 500000;

struct AclOpError {
  int code;
  std::string why;
};

std::string shape_str(at::IntArrayRef dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Operand `index` of `role` ("input" / "output") as a dense CPU tensor over its buffer (no copy); undefined when the
// descriptor is the absent-optional one (ACL_DT_UNDEFINED).
at::Tensor operand(const std::string& op, const char* role, int index, const aclTensorDesc* desc,
                   const aclDataBuffer* buffer) {
  const std::string what = op + ": " + role + " " + std::to_string(index);
  if (desc == nullptr || buffer == nullptr) {
    throw AclOpError{kAclInvalidParam, what + " has no descriptor or data buffer."};
  }
  if (desc->dtype == fake_acl::kUndefined) return at::Tensor();
  const auto type = aten_type(desc->dtype);
  if (!type) {
    throw AclOpError{kAclUnsupportedDataType, what + " has aclDataType " + std::to_string(desc->dtype) +
                                                  ", which the fake cannot read."};
  }
  const at::ScalarType st = *type;
  if (!base_format(desc->kernel_format())) {
    throw AclOpError{kAclFormatNotMatch, what + " has storage format " + std::to_string(desc->kernel_format()) +
                                             "; the fake reads base formats (ND, NCHW, ...) only."};
  }
  const std::vector<int64_t>& dims = desc->kernel_dims();
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw AclOpError{kAclInvalidParam, what + " has storage shape " + shape_str(dims) + "."};
    n *= d;
  }
  const auto options = at::TensorOptions().dtype(st).device(at::kCPU);
  if (n == 0) return at::empty(dims, options);
  void* data = desc->has_const ? const_cast<unsigned char*>(desc->const_data.data()) : buffer->data;
  const size_t size = desc->has_const ? desc->const_data.size() : buffer->size;
  const size_t bytes = static_cast<size_t>(n) * c10::elementSize(st);
  if (data == nullptr || size < bytes) {
    throw AclOpError{kAclInvalidParam, what + ": its data buffer holds " + std::to_string(size) +
                                           " bytes, its storage shape " + shape_str(dims) + " needs " +
                                           std::to_string(bytes) + "."};
  }
  return at::from_blob(data, dims, options);
}

void require_bool(const std::string& op, const char* role, int index, const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kBool) {
    throw AclOpError{kAclUnsupportedDataType, op + ": " + role + " " + std::to_string(index) +
                                                  " must be DT_BOOL (the kernel's only dtype)."};
  }
}

using Compute = std::function<std::vector<at::Tensor>(const std::string& op, const std::vector<at::Tensor>& in,
                                                      const std::vector<at::Tensor>& out, const aclopAttr* attr)>;

struct Kernel {
  int inputs, outputs;
  Compute compute;
};

// A bool-only elementwise op of one or two inputs (broadcast) and one output.
Kernel logical(std::function<at::Tensor(const std::vector<at::Tensor>&)> fn, int inputs) {
  return {inputs, 1, [fn, inputs](const std::string& op, const std::vector<at::Tensor>& in,
                                  const std::vector<at::Tensor>& out, const aclopAttr*) {
            for (int i = 0; i < inputs; ++i) require_bool(op, "input", i, in[i]);
            require_bool(op, "output", 0, out[0]);
            return std::vector<at::Tensor>{fn(in)};
          }};
}

const std::map<std::string, Kernel>& kernels() {
  static const std::map<std::string, Kernel> table = {
      {"LogicalNot", logical([](const std::vector<at::Tensor>& in) { return at::logical_not(in[0]); }, 1)},
      {"LogicalAnd", logical([](const std::vector<at::Tensor>& in) { return at::logical_and(in[0], in[1]); }, 2)},
      {"LogicalOr", logical([](const std::vector<at::Tensor>& in) { return at::logical_or(in[0], in[1]); }, 2)},
  };
  return table;
}

std::string modelled() {
  std::string s;
  for (const auto& [name, kernel] : kernels()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

// Identity: the format cast. Both descriptors carry the logical (origin) shape and their storage format and
// shape; the storage shape must be the format's for that logical shape (formats.h). Any dtype, the same in and out.
int identity(int num_inputs, const aclTensorDesc* const inputs[], const aclDataBuffer* const input_buffers[],
             int num_outputs, const aclTensorDesc* const outputs[], aclDataBuffer* const output_buffers[]) {
  const std::string op = "Identity";
  if (num_inputs != 1 || inputs == nullptr || input_buffers == nullptr) {
    throw AclOpError{kAclInputNotMatch, op + ": " + std::to_string(num_inputs) + " inputs, the op has 1."};
  }
  if (num_outputs != 1 || outputs == nullptr || output_buffers == nullptr) {
    throw AclOpError{kAclOutputNotMatch, op + ": " + std::to_string(num_outputs) + " outputs, the op has 1."};
  }
  const aclTensorDesc* in = inputs[0];
  const aclTensorDesc* out = outputs[0];
  if (in == nullptr || out == nullptr || input_buffers[0] == nullptr || output_buffers[0] == nullptr) {
    throw AclOpError{kAclInvalidParam, op + ": an operand has no descriptor or data buffer."};
  }
  if (in->dtype != out->dtype || !aten_type(in->dtype)) {
    throw AclOpError{kAclUnsupportedDataType, op + ": input aclDataType " + std::to_string(in->dtype) +
                                                  ", output " + std::to_string(out->dtype) + "."};
  }
  if (in->dims != out->dims) {
    throw AclOpError{kAclInvalidParam, op + ": input shape " + shape_str(in->dims) + ", output shape " +
                                           shape_str(out->dims) + "."};
  }
  const int64_t item = static_cast<int64_t>(c10::elementSize(*aten_type(in->dtype)));
  struct Side {
    const char* role;
    const aclTensorDesc* desc;
    void* data;
    size_t size;
  };
  const Side sides[2] = {{"input", in, input_buffers[0]->data, input_buffers[0]->size},
                         {"output", out, output_buffers[0]->data, output_buffers[0]->size}};
  for (const Side& side : sides) {
    const int32_t format = side.desc->kernel_format();
    const std::vector<int64_t> want = storage_shape(format, side.desc->dims, item);
    if (!base_format(format) && !known_private_format(format)) {
      throw AclOpError{kAclFormatNotMatch, op + ": " + side.role + " has storage format " +
                                               std::to_string(format) + ", which the fake cannot read."};
    }
    if (want.empty() || want != side.desc->kernel_dims()) {
      throw AclOpError{kAclInvalidParam, op + ": " + side.role + " in " + format_name(format) + " of shape " +
                                             shape_str(side.desc->dims) + " has storage shape " +
                                             shape_str(side.desc->kernel_dims()) + ", the format's is " +
                                             shape_str(want) + "."};
    }
    const size_t bytes = static_cast<size_t>(product(want) * item);
    if (side.data == nullptr || side.size < bytes) {
      throw AclOpError{kAclInvalidParam, op + ": " + side.role + "'s data buffer holds " + std::to_string(side.size) +
                                             " bytes, its storage shape " + shape_str(want) + " needs " +
                                             std::to_string(bytes) + "."};
    }
  }
  const auto& dims = in->dims;
  const size_t out_bytes = static_cast<size_t>(product(storage_shape(out->kernel_format(), dims, item)) * item);
  std::vector<char> result(out_bytes, 0);  // padding: zero
  const char* src = static_cast<const char*>(sides[0].data);
  for_each_index(dims, [&](const std::vector<int64_t>& idx) {
    const int64_t from = storage_index(in->kernel_format(), dims, item, idx);
    const int64_t to = storage_index(out->kernel_format(), dims, item, idx);
    std::memcpy(result.data() + to * item, src + from * item, static_cast<size_t>(item));
  });
  std::memcpy(sides[1].data, result.data(), out_bytes);  // the input may be the output's memory
  return kAclOk;
}

int execute(const std::string& op, int num_inputs, const aclTensorDesc* const inputs[],
            const aclDataBuffer* const input_buffers[], int num_outputs, const aclTensorDesc* const outputs[],
            aclDataBuffer* const output_buffers[], const aclopAttr* attr) {
  if (op == "Identity") {
    try {
      return identity(num_inputs, inputs, input_buffers, num_outputs, outputs, output_buffers);
    } catch (const AclOpError& e) {
      return reject(e.code, "acl_op " + e.why);
    }
  }
  const auto it = kernels().find(op);
  if (it == kernels().end()) {
    return reject(kAclOpNotFound, "acl_op " + op + ": op type not found, no kernel for it in the fake CANN (it " +
                                      "models " + modelled() + ", Identity; tests/fake_cann/opapi/acl_op.cpp).");
  }
  const Kernel& k = it->second;
  if (num_inputs != k.inputs || (num_inputs > 0 && (inputs == nullptr || input_buffers == nullptr))) {
    return reject(kAclInputNotMatch, "acl_op " + op + ": " + std::to_string(num_inputs) + " inputs, the op has " +
                                         std::to_string(k.inputs) + ".");
  }
  if (num_outputs != k.outputs || (num_outputs > 0 && (outputs == nullptr || output_buffers == nullptr))) {
    return reject(kAclOutputNotMatch, "acl_op " + op + ": " + std::to_string(num_outputs) + " outputs, the op has " +
                                          std::to_string(k.outputs) + ".");
  }
  try {
    std::vector<at::Tensor> in, out;
    for (int i = 0; i < num_inputs; ++i) in.push_back(operand(op, "input", i, inputs[i], input_buffers[i]));
    for (int i = 0; i < num_outputs; ++i) out.push_back(operand(op, "output", i, outputs[i], output_buffers[i]));
    const std::vector<at::Tensor> results = k.compute(op, in, out, attr);
    for (int i = 0; i < num_outputs; ++i) {
      if (!out[i].defined()) continue;
      if (results[i].sizes() != out[i].sizes()) {
        throw AclOpError{kAclInvalidParam, op + ": output " + std::to_string(i) + " has storage shape " +
                                               shape_str(out[i].sizes()) + ", the op gives " +
                                               shape_str(results[i].sizes()) + "."};
      }
      out[i].copy_(results[i]);
    }
    return kAclOk;
  } catch (const AclOpError& e) {
    return reject(e.code, "acl_op " + e.why);
  } catch (const std::exception& e) {
    return reject(kAclInternal, "acl_op " + op + ": " + e.what());
  }
}

}  // namespace
}  // namespace fake

extern "C" int fake_acl_op_execute(const char* op_type, int num_inputs, const aclTensorDesc* const inputs[],
                                   const aclDataBuffer* const input_buffers[], int num_outputs,
                                   const aclTensorDesc* const outputs[], aclDataBuffer* const output_buffers[],
                                   const aclopAttr* attr) {
  return fake::execute(op_type, num_inputs, inputs, input_buffers, num_outputs, outputs, output_buffers, attr);
}
