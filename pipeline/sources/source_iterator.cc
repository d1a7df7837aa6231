#include "pipeline/sources/source_iterator.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

SourceIterator::SourceIterator(std::shared_ptr<const SourceInfo> info, Params params,
                               const SplitOpenContext& context,
                               std::unique_ptr<SplitProvider> provider)
    : info_(std::move(info)),
      params_(std::move(params)),
      context_(context),
      provider_(std::move(provider)) {}

absl::Status SourceIterator::Open(int64_t offset, int64_t records_done) {
  auto reader = info_->open(params_, context_, split_, offset, records_done);
  if (!reader.ok()) {
    return Annotate(reader.status(), absl::StrCat("source ", info_->type, " split ", split_.id()));
  }
  reader_ = std::move(reader).value();
  records_done_ = records_done;
  return absl::OkStatus();
}

absl::Status SourceIterator::GetNext(Element* out, bool* end_of_sequence) {
  while (true) {
    if (reader_ == nullptr) {
      bool no_more_splits = false;
      RETURN_IF_ERROR(provider_->GetNext(&split_, &no_more_splits));
      if (no_more_splits) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(Open(split_.begin_offset(), 0));
    }
    bool split_done = false;
    RETURN_IF_ERROR(Annotate(reader_->Next(out, &split_done),
                             absl::StrCat("source ", info_->type, " split ", split_.id())));
    if (split_done) {
      reader_.reset();
      continue;
    }
    if (!info_->keeps_provenance) {
      out->split_id = split_.id();
      out->record = split_.begin_record() + records_done_;
    }
    ++records_done_;
    *end_of_sequence = false;
    return absl::OkStatus();
  }
}

absl::Status SourceIterator::Save(StateWriter& writer) {
  StateWriter splits = writer.Child("splits");
  RETURN_IF_ERROR(provider_->Save(splits));
  writer.WriteInt("in_split", reader_ != nullptr);
  if (reader_ != nullptr) {
    writer.WriteSplit("split", split_);
    writer.WriteInt("offset", reader_->offset());
    writer.WriteInt("records_done", records_done_);
  }
  return absl::OkStatus();
}

absl::Status SourceIterator::Restore(const StateReader& reader) {
  RETURN_IF_ERROR(provider_->Restore(reader.Child("splits")));
  ASSIGN_OR_RETURN(int64_t in_split, reader.ReadInt("in_split"));
  reader_.reset();
  if (in_split) {
    ASSIGN_OR_RETURN(split_, reader.ReadSplit("split"));
    ASSIGN_OR_RETURN(int64_t offset, reader.ReadInt("offset"));
    ASSIGN_OR_RETURN(int64_t records_done, reader.ReadInt("records_done"));
    RETURN_IF_ERROR(Open(offset, records_done));
  }
  return absl::OkStatus();
}

}  // namespace granary
