// PipelineBuilder: PipelineDefs in code. Parameters become google.protobuf.Struct values the
// way protobuf's JSON mapping would make them (numbers are doubles), so a built pipeline
// equals — and has the fingerprint of — the same pipeline written as JSON.
#include <utility>

#include "google/protobuf/struct.pb.h"
#include "granary/client.h"

namespace granary {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Value ToValue(const ParamValue& param) {
  Value value;
  if (const auto* v = std::get_if<int64_t>(&param)) {
    value.set_number_value(static_cast<double>(*v));
  } else if (const auto* v = std::get_if<double>(&param)) {
    value.set_number_value(*v);
  } else if (const auto* v = std::get_if<bool>(&param)) {
    value.set_bool_value(*v);
  } else if (const auto* v = std::get_if<std::string>(&param)) {
    value.set_string_value(*v);
  } else if (const auto* v = std::get_if<std::vector<int64_t>>(&param)) {
    for (int64_t x : *v) value.mutable_list_value()->add_values()->set_number_value(x);
  } else if (const auto* v = std::get_if<std::vector<double>>(&param)) {
    for (double x : *v) value.mutable_list_value()->add_values()->set_number_value(x);
  } else if (const auto* v = std::get_if<std::vector<std::string>>(&param)) {
    for (const std::string& x : *v) value.mutable_list_value()->add_values()->set_string_value(x);
  }
  return value;
}

// Callers skip empty udf_params: an empty Struct (set but empty) would make the definition
// differ from the JSON that omits them, and so its fingerprint.
void AddParams(const ParamList& params, Struct* out) {
  for (const auto& [name, value] : params) (*out->mutable_fields())[name] = ToValue(value);
}

PipelineBuilder WithSource(const std::string& type, const std::string& key, ParamValue value,
                           const ParamList& params) {
  PipelineDef def;
  def.mutable_source()->set_type(type);
  AddParams({{key, std::move(value)}}, def.mutable_source()->mutable_params());
  AddParams(params, def.mutable_source()->mutable_params());
  return PipelineBuilder::FromDef(std::move(def));
}

}  // namespace

PipelineBuilder PipelineBuilder::FromDef(PipelineDef def) {
  PipelineBuilder builder;
  builder.def_ = std::move(def);
  return builder;
}

PipelineBuilder PipelineBuilder::Range(int64_t stop, ParamList params) {
  return WithSource("range", "stop", stop, params);
}

PipelineBuilder PipelineBuilder::TfRecord(std::vector<std::string> files, ParamList params) {
  return WithSource("tfrecord", "files", std::move(files), params);
}

PipelineBuilder PipelineBuilder::TextLines(std::vector<std::string> files, ParamList params) {
  return WithSource("text_lines", "files", std::move(files), params);
}

PipelineBuilder& PipelineBuilder::Map(const std::string& udf, ParamList udf_params) {
  OpDef* op = def_.add_ops();
  op->set_op("map");
  op->set_udf(udf);
  if (!udf_params.empty()) AddParams(udf_params, op->mutable_udf_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::ParallelMap(const std::string& udf, int num_threads,
                                              ParamList udf_params) {
  OpDef* op = def_.add_ops();
  op->set_op("parallel_map");
  AddParams({{"num_threads", int64_t{num_threads}}}, op->mutable_params());
  op->set_udf(udf);
  if (!udf_params.empty()) AddParams(udf_params, op->mutable_udf_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Filter(const std::string& udf, ParamList udf_params) {
  OpDef* op = def_.add_ops();
  op->set_op("filter");
  op->set_udf(udf);
  if (!udf_params.empty()) AddParams(udf_params, op->mutable_udf_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Shuffle(int64_t buffer_size) {
  OpDef* op = def_.add_ops();
  op->set_op("shuffle");
  AddParams({{"buffer_size", buffer_size}}, op->mutable_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Batch(int64_t batch_size, bool drop_remainder) {
  OpDef* op = def_.add_ops();
  op->set_op("batch");
  AddParams({{"batch_size", batch_size}}, op->mutable_params());
  // Only when set, so that Batch(32) equals the JSON {"batch_size": 32}.
  if (drop_remainder) AddParams({{"drop_remainder", true}}, op->mutable_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Take(int64_t count) {
  OpDef* op = def_.add_ops();
  op->set_op("take");
  AddParams({{"count", count}}, op->mutable_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Skip(int64_t count) {
  OpDef* op = def_.add_ops();
  op->set_op("skip");
  AddParams({{"count", count}}, op->mutable_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Prefetch(int64_t buffer_size) {
  OpDef* op = def_.add_ops();
  op->set_op("prefetch");
  AddParams({{"buffer_size", buffer_size}}, op->mutable_params());
  return *this;
}

PipelineBuilder& PipelineBuilder::Mark(const std::string& name) {
  OpDef* op = def_.add_ops();
  op->set_op("mark");
  AddParams({{"name", name}}, op->mutable_params());
  return *this;
}

}  // namespace granary
