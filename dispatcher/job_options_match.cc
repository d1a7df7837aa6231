#include "dispatcher/job_options_match.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace granary {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// `field` of `options` as an error names it: a scalar as text format prints it (an enum by its
// name), a repeated field as the sorted set of its values, "[a, b]".
std::string FieldValue(const JobOptions& options, const FieldDescriptor& field) {
  std::string value;
  if (!field.is_repeated()) {
    TextFormat::PrintFieldValueToString(options, &field, -1, &value);
    return value;
  }
  std::set<std::string> values;
  const int size = options.GetReflection()->FieldSize(options, &field);
  for (int i = 0; i < size; ++i) {
    TextFormat::PrintFieldValueToString(options, &field, i, &value);
    values.insert(value);
  }
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

}  // namespace

absl::Status CheckJobOptionsMatch(const JobState& job, const JobOptions& requested) {
  JobOptions as_created = job.options();
  JobOptions request = requested;
  if (request.num_consumers() < 1) request.set_num_consumers(1);
  if (job.has_created_num_worker_slots()) {
    as_created.set_num_worker_slots(job.created_num_worker_slots());
  } else {
    request.set_num_worker_slots(as_created.num_worker_slots());
  }
  if (job.has_created_num_local_slots()) {
    as_created.set_num_local_slots(job.created_num_local_slots());
  } else {
    request.set_num_local_slots(as_created.num_local_slots());
  }
  const google::protobuf::Descriptor& descriptor = *JobOptions::descriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    const std::string has = FieldValue(as_created, field);
    const std::string gives = FieldValue(request, field);
    if (has != gives) {
      // Another number of consumers is how an elastic resume opens the job (DESIGN.md §6).
      const std::string hint =
          field.number() == JobOptions::kNumConsumersFieldNumber
              ? absl::StrCat(" (to resume it at ", gives, " consumers, give the positions all ",
                             has, " saved: elastic resume)")
              : "";
      return absl::InvalidArgumentError(absl::StrCat("job '", job.name(), "' has ", field.name(),
                                                     " ", has, "; this request gives ", gives,
                                                     hint));
    }
  }
  return absl::OkStatus();
}

}  // namespace granary
