#include "pipeline/sources/source_files.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/tensor.h"
#include "pipeline/sources/tfrecord_reader.h"

namespace granary {
namespace {

constexpr char kMaxRecordBytes[] = "max_record_bytes";

}  // namespace

std::vector<ParamSpec> FileSourceParams(absl::string_view per_split_param) {
  return {
      {"files", ParamType::kStringList, /*required=*/true},
      {"compression", ParamType::kString, /*required=*/false},
      {std::string(per_split_param), ParamType::kInt, /*required=*/false},
  };
}

std::vector<ParamSpec> RecordSourceParams(absl::string_view per_split_param) {
  std::vector<ParamSpec> specs = FileSourceParams(per_split_param);
  specs.push_back({kMaxRecordBytes, ParamType::kInt, /*required=*/false});
  return specs;
}

absl::StatusOr<int64_t> MaxRecordBytes(const Params& params) {
  const int64_t max_record_bytes = params.GetInt(kMaxRecordBytes, kDefaultMaxRecordBytes);
  if (max_record_bytes < 1) return params.Invalid(kMaxRecordBytes, "must be >= 1");
  RETURN_IF_ERROR(CheckParamLimit(params, kMaxRecordBytes, max_record_bytes, kMaxElementBytes,
                                  "kMaxElementBytes"));
  return max_record_bytes;
}

absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(const Params& params, Env* env,
                                                            absl::string_view source_type) {
  const std::vector<std::string> patterns = params.GetStringList("files");
  if (patterns.empty()) return params.Invalid("files", "must name at least one file pattern");
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const std::string& pattern : patterns) {
    ASSIGN_OR_RETURN(std::vector<std::string> matches, env->Glob(pattern));
    if (matches.empty()) {
      return absl::NotFoundError(
          absl::StrCat("source ", source_type, ": pattern '", pattern, "' matches no file"));
    }
    std::sort(matches.begin(), matches.end());
    for (std::string& match : matches) {
      if (seen.insert(match).second) files.push_back(std::move(match));
    }
  }
  return files;
}

absl::Status ValidateFileSource(const Params& params, Env* env, absl::string_view source_type,
                                absl::string_view per_split_param) {
  if (params.GetStringList("files").empty()) {
    return params.Invalid("files", "must name at least one file pattern");
  }
  // The compression's name is what is checked here; "auto" decides by each path later.
  RETURN_IF_ERROR(FileCompression(params, "").status());
  if (params.GetInt(per_split_param, 0) < 0) return params.Invalid(per_split_param, "must be >= 0");
  if (env != nullptr) RETURN_IF_ERROR(ExpandFilePatterns(params, env, source_type).status());
  return absl::OkStatus();
}

absl::StatusOr<Compression> FileCompression(const Params& params, const std::string& path) {
  const std::string name = params.GetString("compression", "auto");
  if (name == "auto") {
    return absl::EndsWith(path, ".gz") ? Compression::kGzip : Compression::kNone;
  }
  absl::StatusOr<Compression> compression = ParseCompression(name);
  if (!compression.ok()) {
    return params.Invalid("compression",
                          absl::StrCat("must be \"\", \"GZIP\" or \"auto\", not '", name, "'"));
  }
  return *compression;
}

absl::StatusOr<std::vector<Split>> EnumerateFileSplits(const Params& params, Env* env,
                                                       absl::string_view source_type,
                                                       absl::string_view per_split_param,
                                                       int64_t max_record_bytes,
                                                       const RecordScanner& scan) {
  const int64_t per_split = params.GetInt(per_split_param, 0);
  if (per_split < 0) return params.Invalid(per_split_param, "must be >= 0");
  ASSIGN_OR_RETURN(const std::vector<std::string> files,
                   ExpandFilePatterns(params, env, source_type));
  std::vector<Split> splits;
  for (const std::string& path : files) {
    ASSIGN_OR_RETURN(const Compression compression, FileCompression(params, path));
    if (per_split == 0) {
      Split& split = splits.emplace_back();
      split.set_id(splits.size() - 1);
      split.set_file(path);
      split.set_begin_offset(0);
      split.set_begin_record(0);
      split.set_num_records(-1);
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file,
                     OpenMaybeCompressed(env, path, compression));
    int64_t record = 0;
    RETURN_IF_ERROR(scan(std::move(file), path, max_record_bytes, [&](int64_t offset) {
      if (record % per_split == 0) {
        Split& split = splits.emplace_back();
        split.set_id(splits.size() - 1);
        split.set_file(path);
        split.set_begin_offset(offset);
        split.set_begin_record(record);
        split.set_num_records(0);
      }
      splits.back().set_num_records(splits.back().num_records() + 1);
      ++record;
    }));
  }
  return splits;
}

absl::StatusOr<OpenedFileSplit> OpenFileSplit(const Params& params, Env* env, const Split& split,
                                              int64_t offset, int64_t records_done) {
  if (offset < 0 || records_done < 0 ||
      (split.num_records() >= 0 && records_done > split.num_records())) {
    return absl::InvalidArgumentError(
        absl::StrCat(split.file(), ": cannot open split ", split.id(), " (", split.num_records(),
                     " records) at offset ", offset, " after ", records_done, " records"));
  }
  ASSIGN_OR_RETURN(const Compression compression, FileCompression(params, split.file()));
  OpenedFileSplit opened;
  ASSIGN_OR_RETURN(opened.file, OpenMaybeCompressed(env, split.file(), compression));
  if (offset > 0) RETURN_IF_ERROR(opened.file->Skip(static_cast<uint64_t>(offset)));
  opened.records_left = split.num_records() < 0 ? -1 : split.num_records() - records_done;
  return opened;
}

FileSplitReader::FileSplitReader(const Split& split, int64_t records_left)
    : split_(split), records_left_(records_left) {}

absl::Status FileSplitReader::Next(Element* out, bool* end) {
  if (records_left_ == 0) {
    *end = true;
    return absl::OkStatus();
  }
  std::string record;
  RETURN_IF_ERROR(ReadRecord(&record, end));
  if (*end) {
    if (records_left_ > 0) {
      return absl::DataLossError(
          absl::StrCat(split_.file(), ": ends at offset ", offset(), " with ", records_left_,
                       " records of split ", split_.id(),
                       " unread (the file changed since its splits were enumerated?)"));
    }
    return absl::OkStatus();
  }
  out->tensors.clear();
  out->tensors.push_back(Tensor::String(std::move(record)));
  if (records_left_ > 0) --records_left_;
  return absl::OkStatus();
}

namespace {

// The record limit of a source made by FileSourceInfo.
absl::StatusOr<int64_t> RecordLimit(const FileSourceSpec& spec, const Params& params) {
  if (!spec.bounded_records) return kUnlimitedRecordBytes;
  return MaxRecordBytes(params);
}

}  // namespace

SourceInfo FileSourceInfo(FileSourceSpec spec) {
  SourceInfo info;
  info.type = spec.type;
  info.params = spec.bounded_records ? RecordSourceParams(spec.per_split_param)
                                     : FileSourceParams(spec.per_split_param);
  auto shared = std::make_shared<const FileSourceSpec>(std::move(spec));
  info.validate = [shared](const Params& params, Env* env) {
    RETURN_IF_ERROR(ValidateFileSource(params, env, shared->type, shared->per_split_param));
    return RecordLimit(*shared, params).status();
  };
  info.enumerate = [shared](const Params& params,
                            Env* env) -> absl::StatusOr<std::vector<Split>> {
    ASSIGN_OR_RETURN(const int64_t max_record_bytes, RecordLimit(*shared, params));
    return EnumerateFileSplits(params, env, shared->type, shared->per_split_param,
                               max_record_bytes, shared->scan);
  };
  info.open = [shared](const Params& params, const SplitOpenContext& context, const Split& split,
                       int64_t offset,
                       int64_t records_done) -> absl::StatusOr<std::unique_ptr<SplitReader>> {
    ASSIGN_OR_RETURN(const int64_t max_record_bytes, RecordLimit(*shared, params));
    ASSIGN_OR_RETURN(OpenedFileSplit opened,
                     OpenFileSplit(params, context.env, split, offset, records_done));
    return shared->make_reader(context, split, std::move(opened), offset, max_record_bytes);
  };
  return info;
}

}  // namespace granary
