#include "pipeline/udfs/python_helper_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "transport/element_image.h"

namespace granary {
namespace {

constexpr size_t kInitialSegmentBytes = 1 << 20;
// Where tensors start in the segment (python_udf_helper.py's ALIGNMENT): any dtype's, and a
// cache line's.
constexpr size_t kAlignment = 64;
constexpr int kSegmentFdInHelper = 3;
// How long a helper whose stdin closed has to exit before it is SIGKILLed.
constexpr absl::Duration kExitGrace = absl::Seconds(1);

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

size_t Aligned(size_t at) { return (at + kAlignment - 1) / kAlignment * kAlignment; }

size_t SegmentBytes(const Tensor& tensor) {
  if (tensor.dtype() != DT_STRING) return tensor.content().size();
  size_t bytes = tensor.strings().size() * sizeof(int64_t);
  for (const std::string& value : tensor.strings()) bytes += value.size();
  return bytes;
}

absl::Status Malformed(absl::string_view answer, absl::string_view what) {
  return absl::InternalError(absl::StrCat("a Python UDF helper's answer is malformed (", what,
                                          "): '", answer, "'"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PythonHelperProcess>> PythonHelperProcess::Start(
    const std::string& interpreter, absl::string_view function, absl::Duration call_timeout) {
  std::unique_ptr<PythonHelperProcess> helper(new PythonHelperProcess());
  helper->interpreter_ = interpreter;
  helper->call_timeout_ = call_timeout;
  helper->segment_fd_ = ::memfd_create("granary-python-udf", MFD_CLOEXEC);
  if (helper->segment_fd_ < 0) return ErrnoError("memfd_create for a Python UDF's segment");
  RETURN_IF_ERROR(helper->Grow(std::max(kInitialSegmentBytes, function.size())));
  // Requests go over a socket, so that a write to a helper that died fails with EPIPE instead of
  // raising SIGPIPE (send's MSG_NOSIGNAL); answers over a pipe.
  int requests[2];
  int answers[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, requests) != 0) {
    return ErrnoError("socketpair");
  }
  if (::pipe2(answers, O_CLOEXEC) != 0) {
    ::close(requests[0]);
    ::close(requests[1]);
    return ErrnoError("pipe2");
  }
  // Everything the child needs is made before fork (only async-signal-safe calls after it).
  const std::string source(kPythonUdfHelperSource);
  std::vector<char*> argv = {const_cast<char*>(interpreter.c_str()), const_cast<char*>("-c"),
                             const_cast<char*>(source.c_str()), nullptr};
  const std::string exec_failed =
      absl::StrCat("granary: cannot start the Python UDF helper: ", interpreter, "\n");
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {requests[0], requests[1], answers[0], answers[1]}) ::close(fd);
    return ErrnoError("fork for a Python UDF's helper");
  }
  if (pid == 0) {
    // dup2 leaves the new descriptor without close-on-exec; a descriptor already in place
    // keeps its flag, so it is cleared by hand.
    const int moves[][2] = {
        {requests[0], 0}, {answers[1], 1}, {helper->segment_fd_, kSegmentFdInHelper}};
    for (const auto& [from, to] : moves) {
      if (from == to ? ::fcntl(to, F_SETFD, 0) < 0 : ::dup2(from, to) < 0) ::_exit(127);
    }
    ::execv(argv[0], argv.data());
    (void)!::write(2, exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  ::close(requests[0]);
  ::close(answers[1]);
  helper->pid_ = pid;
  helper->requests_fd_ = requests[1];
  helper->answers_fd_ = answers[0];
  std::memcpy(helper->segment_, function.data(), function.size());
  // The interpreter's start-up and the function's imports are not the call timeout's business:
  // they get a minute more.
  absl::StatusOr<std::string> loaded =
      helper->Exchange(absl::StrCat("load ", helper->segment_size_, " ", function.size(), "\n"),
                       absl::Now() + call_timeout + absl::Minutes(1));
  if (!loaded.ok()) {
    if (absl::IsInvalidArgument(loaded.status())) {
      return absl::InvalidArgumentError(absl::StrCat("the Python function does not load in ",
                                                     interpreter, ": ",
                                                     loaded.status().message()));
    }
    return absl::UnavailableError(absl::StrCat(
        "the Python UDF helper (", interpreter, ") did not start: ", loaded.status().message(),
        " (it needs NumPy, and the modules the function imports; its stderr says more)"));
  }
  if (*loaded != "ok") {
    return absl::InternalError(absl::StrCat("the Python UDF helper answered '", *loaded,
                                            "' to load"));
  }
  return helper;
}

PythonHelperProcess::~PythonHelperProcess() {
  if (requests_fd_ >= 0) ::close(requests_fd_);
  if (pid_ > 0) {
    const absl::Time deadline = absl::Now() + kExitGrace;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (absl::Now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  if (answers_fd_ >= 0) ::close(answers_fd_);
  if (segment_ != nullptr) ::munmap(segment_, segment_size_);
  if (segment_fd_ >= 0) ::close(segment_fd_);
}

absl::Status PythonHelperProcess::Grow(size_t size) {
  if (size <= segment_size_) return absl::OkStatus();
  const size_t new_size = std::max(size, 2 * segment_size_);
  if (::ftruncate(segment_fd_, static_cast<off_t>(new_size)) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("growing a Python UDF's segment to ",
                                                     new_size, " bytes: ", std::strerror(errno)));
  }
  void* mapped = ::mmap(nullptr, new_size, PROT_READ | PROT_WRITE, MAP_SHARED, segment_fd_, 0);
  if (mapped == MAP_FAILED) return ErrnoError("mmap of a Python UDF's segment");
  if (segment_ != nullptr) ::munmap(segment_, segment_size_);
  segment_ = static_cast<char*>(mapped);
  segment_size_ = new_size;
  return absl::OkStatus();
}

absl::Status PythonHelperProcess::Died(absl::StatusCode code, absl::string_view why) {
  int status = 0;
  if (code == absl::StatusCode::kDeadlineExceeded) ::kill(pid_, SIGKILL);
  const pid_t reaped = ::waitpid(pid_, &status, 0);
  const std::string how = reaped == pid_ ? DescribeWaitStatus(status) : "is gone";
  const pid_t pid = pid_;
  pid_ = -1;
  return absl::Status(code, absl::StrCat(why, " (its helper process ", pid, " ", how, ")"));
}

absl::StatusOr<std::string> PythonHelperProcess::Read(size_t n, absl::Time deadline) {
  while (true) {
    if (n > 0 && buffered_.size() >= n) {
      std::string out = buffered_.substr(0, n);
      buffered_.erase(0, n);
      return out;
    }
    if (n == 0) {
      const size_t newline = buffered_.find('\n');
      if (newline != std::string::npos) {
        std::string out = buffered_.substr(0, newline);
        buffered_.erase(0, newline + 1);
        return out;
      }
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return Died(absl::StatusCode::kDeadlineExceeded,
                  absl::StrCat("the Python function did not return within ",
                               absl::FormatDuration(call_timeout_), " and was killed"));
    }
    pollfd readable{answers_fd_, POLLIN, 0};
    const int ready = ::poll(
        &readable, 1,
        static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    if (ready < 0 && errno != EINTR) return ErrnoError("poll on a Python UDF's helper");
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(answers_fd_, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return Died(absl::StatusCode::kUnavailable, "the Python function's process died");
    }
    buffered_.append(chunk, static_cast<size_t>(got));
  }
}

absl::StatusOr<std::string> PythonHelperProcess::Exchange(const std::string& line,
                                                          absl::Time deadline) {
  if (!alive()) return absl::UnavailableError("the Python UDF's helper process is gone");
  for (size_t written = 0; written < line.size();) {
    const ssize_t n =
        ::send(requests_fd_, line.data() + written, line.size() - written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Died(absl::StatusCode::kUnavailable, "the Python function's process died");
    }
    written += static_cast<size_t>(n);
  }
  ASSIGN_OR_RETURN(std::string answer, Read(0, deadline));
  if (absl::StartsWith(answer, "error ")) {
    size_t length = 0;
    if (!absl::SimpleAtoi(answer.substr(6), &length)) {
      return absl::InternalError(absl::StrCat("a Python UDF helper's answer is malformed: '",
                                              answer, "'"));
    }
    ASSIGN_OR_RETURN(std::string traceback, Read(length, deadline));
    return absl::InvalidArgumentError(absl::StrCat("the Python function raised:\n", traceback));
  }
  return answer;
}

absl::StatusOr<std::string> PythonHelperProcess::WriteTensors(const std::vector<Tensor>& tensors,
                                                              size_t* end) {
  size_t at = 0;
  for (const Tensor& tensor : tensors) at = Aligned(at + SegmentBytes(tensor));
  RETURN_IF_ERROR(Grow(at));
  std::string words = absl::StrCat(tensors.size());
  at = 0;
  for (const Tensor& tensor : tensors) {
    absl::StrAppend(&words, " ", static_cast<int>(tensor.dtype()), " ", at, " ", tensor.rank());
    for (const int64_t dim : tensor.shape()) absl::StrAppend(&words, " ", dim);
    if (tensor.dtype() != DT_STRING) {
      std::memcpy(segment_ + at, tensor.content().data(), tensor.content().size());
    } else {
      char* lengths = segment_ + at;
      char* values = lengths + tensor.strings().size() * sizeof(int64_t);
      for (const std::string& value : tensor.strings()) {
        const int64_t length = static_cast<int64_t>(value.size());
        std::memcpy(lengths, &length, sizeof(length));
        lengths += sizeof(length);
        std::memcpy(values, value.data(), value.size());
        values += value.size();
      }
    }
    at = Aligned(at + SegmentBytes(tensor));
  }
  *end = at;
  return words;
}

absl::StatusOr<std::vector<Tensor>> PythonHelperProcess::ReadTensors(
    absl::string_view answer, absl::Span<const absl::string_view> words) const {
  std::vector<uint64_t> numbers(words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    if (!absl::SimpleAtoi(words[i], &numbers[i])) return Malformed(answer, "not a number");
  }
  size_t at = 0;
  auto next = [&](uint64_t* value) {
    if (at >= numbers.size()) return false;
    *value = numbers[at++];
    return true;
  };
  uint64_t count = 0;
  if (!next(&count)) return Malformed(answer, "no tensor count");
  std::vector<Tensor> tensors;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t dtype = 0, offset = 0, rank = 0;
    if (!next(&dtype) || !next(&offset) || !next(&rank) || rank > numbers.size()) {
      return Malformed(answer, "a tensor's dtype, offset or rank");
    }
    if (dtype < DT_UINT8 || dtype > DT_STRING) return Malformed(answer, "an unknown dtype");
    std::vector<int64_t> shape(rank);
    uint64_t elements = 1;
    for (int64_t& dim : shape) {
      uint64_t value = 0;
      if (!next(&value) || (value != 0 && elements > segment_size_ / value)) {
        return Malformed(answer, "a shape larger than the segment");
      }
      dim = static_cast<int64_t>(value);
      elements *= value;
    }
    const DataType type = static_cast<DataType>(dtype);
    const uint64_t unit = type == DT_STRING ? sizeof(int64_t) : DtypeSize(type);
    if (offset > segment_size_ || elements > (segment_size_ - offset) / unit) {
      return Malformed(answer, "a tensor past the segment's end");
    }
    if (type != DT_STRING) {
      Tensor tensor = Tensor::Uninitialized(type, std::move(shape));
      std::memcpy(tensor.mutable_bytes(), segment_ + offset, elements * unit);
      tensors.push_back(std::move(tensor));
      continue;
    }
    std::vector<std::string> values(elements);
    size_t value_at = offset + elements * sizeof(int64_t);
    for (uint64_t v = 0; v < elements; ++v) {
      int64_t length = 0;
      std::memcpy(&length, segment_ + offset + v * sizeof(int64_t), sizeof(length));
      if (length < 0 || static_cast<uint64_t>(length) > segment_size_ - value_at) {
        return Malformed(answer, "a string past the segment's end");
      }
      values[v].assign(segment_ + value_at, static_cast<size_t>(length));
      value_at += static_cast<size_t>(length);
    }
    tensors.push_back(Tensor::Strings(std::move(shape), std::move(values)));
  }
  if (at != numbers.size()) return Malformed(answer, "words after the last tensor");
  return tensors;
}

absl::StatusOr<std::string> PythonHelperProcess::Call(absl::string_view command,
                                                      const Element& element,
                                                      uint64_t random_key) {
  size_t end = 0;
  ASSIGN_OR_RETURN(const std::string tensors, WriteTensors(element.tensors, &end));
  const absl::Time deadline = absl::Now() + call_timeout_;
  ASSIGN_OR_RETURN(std::string answer,
                   Exchange(absl::StrCat(command, " ", segment_size_, " ", end, " ", random_key,
                                         " ", tensors, "\n"),
                            deadline));
  while (absl::StartsWith(answer, "grow ")) {
    size_t needed = 0;
    if (!absl::SimpleAtoi(answer.substr(5), &needed)) break;
    RETURN_IF_ERROR(Grow(needed));
    ASSIGN_OR_RETURN(answer, Exchange(absl::StrCat("resume ", segment_size_, "\n"), deadline));
  }
  return answer;
}

absl::Status PythonHelperProcess::Map(Element& element, uint64_t random_key) {
  ASSIGN_OR_RETURN(const std::string answer, Call("map", element, random_key));
  const std::vector<absl::string_view> words = absl::StrSplit(answer, ' ');
  if (words.empty() || words[0] != "out") return Malformed(answer, "not 'out'");
  ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                   ReadTensors(answer, absl::MakeConstSpan(words).subspan(1)));
  // New tensors of its own (made in the row's place in its batch, inside a
  // ScopedRowDestinations); the provenance stays, and the element holds no image until it is
  // serialized again.
  element.tensors = std::move(tensors);
  element.image.reset();
  return absl::OkStatus();
}

absl::StatusOr<bool> PythonHelperProcess::Keep(const Element& element, uint64_t random_key) {
  ASSIGN_OR_RETURN(const std::string answer, Call("keep", element, random_key));
  if (answer == "keep 1") return true;
  if (answer == "keep 0") return false;
  return Malformed(answer, "not 'keep 0|1'");
}

}  // namespace granary
