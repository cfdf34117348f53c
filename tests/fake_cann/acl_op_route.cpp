// TEST-ONLY fake ACL runtime, part of libascendcl.so with runtime.cpp: the acl_op (TBE/GE single-op) route.
// torch_npu takes it below Atlas A2, with jit compile on, and where an aclnn operator is missing (op-plugin's
// DO_COMPATIBILITY): OpCommand describes each input and output (aclCreateTensorDesc with the base shape and origin
// format, aclSetTensorFormat / aclSetTensorShape with the storage ones, aclCreateDataBuffer with the address and
// bytes) and the attributes (aclopCreateAttr, aclopSetAttr*), then calls aclopCompileAndExecute (V2 where it reads
// an output shape back). The objects are acl_op_desc.h's; the operators are computed by libopapi.so
// (opapi/acl_op.cpp), which refuses an op type it does not model with ACL_ERROR_OP_NOT_FOUND, as CANN does for an op
// without a kernel. Every launch is counted as "acl_op <type>".
#include <acl/acl.h>
#include <acl/acl_op_compiler.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "acl_op_desc.h"
#include "runtime.h"

namespace {

using fake_rt::count;
constexpr aclError kOk = ACL_SUCCESS;

// aclopSetAttr*: replaces the attribute's value.
template <typename Fill>
aclError set_attr(aclopAttr* attr, const char* name, fake_acl::AttrKind kind, Fill&& fill) {
  if (attr == nullptr || name == nullptr) return ACL_ERROR_INVALID_PARAM;
  fake_acl::AttrValue value;
  value.kind = kind;
  fill(value);
  attr->values[name] = std::move(value);
  return kOk;
}

// aclopCompileAndExecute(V2): counted, then run by libopapi.so (loaded by torch_npu; else loaded here).
aclError run_acl_op(const char* op_type, int num_inputs, const aclTensorDesc* const inputs[],
                    const aclDataBuffer* const input_buffers[], int num_outputs, const aclTensorDesc* const outputs[],
                    aclDataBuffer* const output_buffers[], const aclopAttr* attr) {
  if (op_type == nullptr) return ACL_ERROR_INVALID_PARAM;
  count((std::string("acl_op ") + op_type).c_str());
  using Execute = decltype(&fake_acl_op_execute);
  static const Execute execute = [] {
    void* opapi = dlopen("libopapi.so", RTLD_NOW);  // kept open: the process's copy, found on LD_LIBRARY_PATH
    return opapi != nullptr ? reinterpret_cast<Execute>(dlsym(opapi, "fake_acl_op_execute")) : nullptr;
  }();
  if (execute == nullptr) return ACL_ERROR_OP_NOT_FOUND;
  return execute(op_type, num_inputs, inputs, input_buffers, num_outputs, outputs, output_buffers, attr);
}

}  // namespace

extern "C" {

aclTensorDesc* aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t* dims, aclFormat format) {
  if (numDims < 0 || (numDims > 0 && dims == nullptr)) return nullptr;
  auto* desc = new aclTensorDesc;
  desc->dtype = dataType;
  desc->format = format;
  desc->dims.assign(dims, dims + numDims);
  return desc;
}

void aclDestroyTensorDesc(const aclTensorDesc* desc) { delete desc; }

aclError aclSetTensorFormat(aclTensorDesc* desc, aclFormat format) {
  if (desc == nullptr) return ACL_ERROR_INVALID_PARAM;
  desc->storage_format = format;
  desc->has_storage_format = true;
  return kOk;
}

aclError aclSetTensorShape(aclTensorDesc* desc, int numDims, const int64_t* dims) {
  if (desc == nullptr || numDims < 0 || (numDims > 0 && dims == nullptr)) return ACL_ERROR_INVALID_PARAM;
  desc->storage_dims.assign(dims, dims + numDims);
  desc->has_storage_dims = true;
  return kOk;
}

aclError aclSetTensorStorageFormat(aclTensorDesc* desc, aclFormat format) { return aclSetTensorFormat(desc, format); }

aclError aclSetTensorStorageShape(aclTensorDesc* desc, int numDims, const int64_t* dims) {
  return aclSetTensorShape(desc, numDims, dims);
}

aclError aclSetTensorOriginFormat(aclTensorDesc* desc, aclFormat format) {
  if (desc == nullptr) return ACL_ERROR_INVALID_PARAM;
  desc->format = format;
  return kOk;
}

aclError aclSetTensorOriginShape(aclTensorDesc* desc, int numDims, const int64_t* dims) {
  if (desc == nullptr || numDims < 0 || (numDims > 0 && dims == nullptr)) return ACL_ERROR_INVALID_PARAM;
  desc->dims.assign(dims, dims + numDims);
  return kOk;
}

aclError aclSetTensorShapeRange(aclTensorDesc* desc, size_t dimsCount,
                                int64_t dimsRange[][ACL_TENSOR_SHAPE_RANGE_NUM]) {
  if (desc == nullptr || (dimsCount > 0 && dimsRange == nullptr)) return ACL_ERROR_INVALID_PARAM;
  desc->shape_range.clear();
  for (size_t i = 0; i < dimsCount; ++i) desc->shape_range.push_back({dimsRange[i][0], dimsRange[i][1]});
  return kOk;
}

aclError aclSetTensorPlaceMent(aclTensorDesc* desc, aclMemType memType) {
  if (desc == nullptr) return ACL_ERROR_INVALID_PARAM;
  desc->placement = memType;
  return kOk;
}

aclError aclSetTensorConst(aclTensorDesc* desc, void* dataBuffer, size_t length) {
  if (desc == nullptr || (length > 0 && dataBuffer == nullptr)) return ACL_ERROR_INVALID_PARAM;
  const auto* bytes = static_cast<const unsigned char*>(dataBuffer);
  desc->const_data.assign(bytes, bytes + length);
  desc->has_const = true;
  return kOk;
}

void aclSetTensorDescName(aclTensorDesc* desc, const char* name) {
  if (desc != nullptr) desc->name = name != nullptr ? name : "";
}

const char* aclGetTensorDescName(aclTensorDesc* desc) { return desc != nullptr ? desc->name.c_str() : ""; }

aclDataType aclGetTensorDescType(const aclTensorDesc* desc) {
  return desc != nullptr ? static_cast<aclDataType>(desc->dtype) : ACL_DT_UNDEFINED;
}

aclFormat aclGetTensorDescFormat(const aclTensorDesc* desc) {
  return desc != nullptr ? static_cast<aclFormat>(desc->format) : ACL_FORMAT_UNDEFINED;
}

size_t aclGetTensorDescNumDims(const aclTensorDesc* desc) { return desc != nullptr ? desc->dims.size() : 0; }

aclError aclGetTensorDescDimV2(const aclTensorDesc* desc, size_t index, int64_t* dimSize) {
  if (desc == nullptr || dimSize == nullptr || index >= desc->dims.size()) return ACL_ERROR_INVALID_PARAM;
  *dimSize = desc->dims[index];
  return kOk;
}

int64_t aclGetTensorDescDim(const aclTensorDesc* desc, size_t index) {
  return desc != nullptr && index < desc->dims.size() ? desc->dims[index] : -1;
}

size_t aclGetTensorDescElementCount(const aclTensorDesc* desc) {
  if (desc == nullptr) return 0;
  size_t n = 1;
  for (int64_t d : desc->dims) n *= d < 0 ? 0 : static_cast<size_t>(d);
  return n;
}

aclDataBuffer* aclCreateDataBuffer(void* data, size_t size) {
  auto* buffer = new aclDataBuffer;
  buffer->data = data;
  buffer->size = size;
  return buffer;
}

aclError aclDestroyDataBuffer(const aclDataBuffer* dataBuffer) {
  if (dataBuffer == nullptr) return ACL_ERROR_INVALID_PARAM;
  delete dataBuffer;
  return kOk;
}

aclError aclUpdateDataBuffer(aclDataBuffer* dataBuffer, void* data, size_t size) {
  if (dataBuffer == nullptr) return ACL_ERROR_INVALID_PARAM;
  dataBuffer->data = data;
  dataBuffer->size = size;
  return kOk;
}

void* aclGetDataBufferAddr(const aclDataBuffer* dataBuffer) {
  return dataBuffer != nullptr ? dataBuffer->data : nullptr;
}

size_t aclGetDataBufferSizeV2(const aclDataBuffer* dataBuffer) { return dataBuffer != nullptr ? dataBuffer->size : 0; }

uint32_t aclGetDataBufferSize(const aclDataBuffer* dataBuffer) {
  return dataBuffer != nullptr ? static_cast<uint32_t>(dataBuffer->size) : 0;
}

aclopAttr* aclopCreateAttr() { return new aclopAttr; }

void aclopDestroyAttr(const aclopAttr* attr) { delete attr; }

aclError aclopSetAttrBool(aclopAttr* attr, const char* attrName, uint8_t attrValue) {
  return set_attr(attr, attrName, fake_acl::AttrKind::Bool, [&](fake_acl::AttrValue& v) { v.i = attrValue != 0; });
}

aclError aclopSetAttrInt(aclopAttr* attr, const char* attrName, int64_t attrValue) {
  return set_attr(attr, attrName, fake_acl::AttrKind::Int, [&](fake_acl::AttrValue& v) { v.i = attrValue; });
}

aclError aclopSetAttrFloat(aclopAttr* attr, const char* attrName, float attrValue) {
  return set_attr(attr, attrName, fake_acl::AttrKind::Float, [&](fake_acl::AttrValue& v) { v.f = attrValue; });
}

aclError aclopSetAttrString(aclopAttr* attr, const char* attrName, const char* attrValue) {
  if (attrValue == nullptr) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::String, [&](fake_acl::AttrValue& v) { v.s = attrValue; });
}

aclError aclopSetAttrDataType(aclopAttr* attr, const char* attrName, aclDataType attrValue) {
  return set_attr(attr, attrName, fake_acl::AttrKind::DataType, [&](fake_acl::AttrValue& v) { v.i = attrValue; });
}

aclError aclopSetAttrListBool(aclopAttr* attr, const char* attrName, int numValues, const uint8_t* values) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::ListBool, [&](fake_acl::AttrValue& v) {
    for (int i = 0; i < numValues; ++i) v.ints.push_back(values[i] != 0);
  });
}

aclError aclopSetAttrListInt(aclopAttr* attr, const char* attrName, int numValues, const int64_t* values) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::ListInt,
                  [&](fake_acl::AttrValue& v) { v.ints.assign(values, values + numValues); });
}

aclError aclopSetAttrListFloat(aclopAttr* attr, const char* attrName, int numValues, const float* values) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::ListFloat,
                  [&](fake_acl::AttrValue& v) { v.floats.assign(values, values + numValues); });
}

aclError aclopSetAttrListString(aclopAttr* attr, const char* attrName, int numValues, const char** values) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  for (int i = 0; i < numValues; ++i) if (values[i] == nullptr) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::ListString,
                  [&](fake_acl::AttrValue& v) { v.strings.assign(values, values + numValues); });
}

aclError aclopSetAttrListDataType(aclopAttr* attr, const char* attrName, int numValues, const aclDataType values[]) {
  if (numValues < 0 || (numValues > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, fake_acl::AttrKind::ListDataType,
                  [&](fake_acl::AttrValue& v) { v.ints.assign(values, values + numValues); });
}

aclError aclopSetAttrListListInt(aclopAttr* attr, const char* attrName, int numLists, const int* numValues,
                                 const int64_t* const values[]) {
  if (numLists < 0 || (numLists > 0 && (numValues == nullptr || values == nullptr))) return ACL_ERROR_INVALID_PARAM;
  for (int i = 0; i < numLists; ++i) if (numValues[i] < 0 || (numValues[i] > 0 && values[i] == nullptr)) {
    return ACL_ERROR_INVALID_PARAM;
  }
  return set_attr(attr, attrName, fake_acl::AttrKind::ListListInt, [&](fake_acl::AttrValue& v) {
    for (int i = 0; i < numLists; ++i) v.lists.emplace_back(values[i], values[i] + numValues[i]);
  });
}

aclError aclopCompileAndExecute(const char* opType, int numInputs, const aclTensorDesc* const inputDesc[],
                                const aclDataBuffer* const inputs[], int numOutputs,
                                const aclTensorDesc* const outputDesc[], aclDataBuffer* const outputs[],
                                const aclopAttr* attr, aclopEngineType, aclopCompileType, const char*, aclrtStream) {
  return run_acl_op(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr);
}

aclError aclopCompileAndExecuteV2(const char* opType, int numInputs, aclTensorDesc* inputDesc[],
                                  aclDataBuffer* inputs[], int numOutputs, aclTensorDesc* outputDesc[],
                                  aclDataBuffer* outputs[], aclopAttr* attr, aclopEngineType, aclopCompileType,
                                  const char*, aclrtStream) {
  return run_acl_op(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr);
}

}  // extern "C"
