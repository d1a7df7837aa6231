// python / python_filter (udf_python.h): real helper processes of /usr/bin/python3 running
// functions pickled by cloudpickle, as granary.Dataset.map(fn) ships them.
#include "pipeline/udfs/udf_python.h"

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/udf_test_util.h"
#include "testing/scoped_temp_dir.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

void RegisterAllowed(UdfRegistry* registry) {
  RegisterPythonUdfs(registry, PythonUdfOptions{.allowed = true});
}
void RegisterNotAllowed(UdfRegistry* registry) { RegisterPythonUdfs(registry, PythonUdfOptions{}); }

constexpr RegisteredUdf kPython = {RegisterAllowed, "python"};
constexpr RegisteredUdf kPythonFilter = {RegisterAllowed, "python_filter"};
constexpr RegisteredUdf kPythonNotAllowed = {RegisterNotAllowed, "python"};

// The UDF params running the function `f` that `definition` (Python statements) defines, with
// `more` (JSON members, e.g. `"determinism_check_every": 0`) if given.
std::string ParamsFor(const std::string& definition, int64_t timeout_ms = 0,
                      const std::string& more = "") {
  Subprocess python({"/usr/bin/python3", "-c",
                     absl::StrCat("import base64, os, sys, time\nimport cloudpickle\n"
                                  "import numpy as np\n",
                                  definition,
                                  "\nprint(base64.b64encode(cloudpickle.dumps(f)).decode())")});
  const std::string pickled(absl::StripAsciiWhitespace(python.ReadAll()));
  EXPECT_EQ(python.Wait(), 0) << definition;
  return absl::StrCat(R"({"function": ")", pickled, "\"",
                      timeout_ms > 0 ? absl::StrCat(R"(, "timeout_ms": )", timeout_ms) : "",
                      more.empty() ? "" : ", ", more, "}");
}

std::unique_ptr<Udf> Made(const RegisteredUdf& udf, const std::string& params) {
  absl::StatusOr<std::unique_ptr<Udf>> made = MakeUdf(udf, params);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

bool ProcessExists(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0; }

TEST(PythonUdfTest, TheFunctionGetsTheTensorsAsArraysAndBytesAndItsResultIsTheElement) {
  const Element out = ApplyUdf(
      kPython, ParamsFor("def f(x, s):\n  return x * 2, len(s), s.upper()"),
      MakeElement({Tensor::Scalar<int64_t>(21), Tensor::String("hello")}));
  ASSERT_EQ(out.tensors.size(), 3u);
  EXPECT_EQ(out.tensors[0].dtype(), DT_INT64);
  EXPECT_TRUE(out.tensors[0].shape().empty()) << out.tensors[0].DebugString();
  EXPECT_EQ(*out.tensors[0].data<int64_t>(), 42);
  EXPECT_EQ(*out.tensors[1].data<int64_t>(), 5);
  ASSERT_EQ(out.tensors[2].dtype(), DT_STRING);
  EXPECT_EQ(out.tensors[2].strings(), std::vector<std::string>{"HELLO"});
}

TEST(PythonUdfTest, EveryDtypeAndStringArraysCrossToTheFunctionAndBackUnchanged) {
  const std::vector<Tensor> tensors = {
      Tensor::FromVector<uint8_t>({2, 3}, {0, 1, 2, 253, 254, 255}),
      Tensor::FromVector<int32_t>({4}, {-2147483647 - 1, -1, 0, 2147483647}),
      Tensor::Scalar<int64_t>(-(int64_t{1} << 62)),
      Tensor::FromVector<float>({2, 2}, {0.5f, -1.25f, 3e38f, -0.0f}),
      Tensor::FromVector<double>({3}, {1e-300, -2.5, 1e300}),
      Tensor::FromVector<bool>({2}, {true, false}),
      Tensor::String(std::string("bytes\0with a zero", 17)),
      Tensor::Strings({2, 2}, {"", "a", std::string("b\0c", 3), std::string(300, 'x')}),
      Tensor::Uninitialized(DT_FLOAT, {0, 5}),
  };
  const Element out = ApplyUdf(
      kPython, ParamsFor("def f(*xs):\n  assert xs[5].dtype == bool and xs[6] == b'bytes\\0with a "
                         "zero', xs\n  return xs"),
      MakeElement(tensors));
  ASSERT_EQ(out.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(out.tensors[i], tensors[i])
        << i << ": " << out.tensors[i].DebugString() << " vs " << tensors[i].DebugString();
  }
}

TEST(PythonUdfTest, ANonContiguousOrPythonResultIsWrittenAsItsValues) {
  const Element out = ApplyUdf(
      kPython,
      ParamsFor("def f(x):\n  return x.T, 'text', 3.5, True, np.array(['ab', 'c'], dtype=object)"),
      MakeElement({Tensor::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6})}));
  ASSERT_EQ(out.tensors.size(), 5u);
  EXPECT_EQ(out.tensors[0], Tensor::FromVector<int32_t>({3, 2}, {1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out.tensors[1], Tensor::String("text"));
  EXPECT_EQ(out.tensors[2], Tensor::Scalar<double>(3.5));
  EXPECT_EQ(out.tensors[3], Tensor::Scalar<bool>(true));
  EXPECT_EQ(out.tensors[4], Tensor::Strings({2}, {"ab", "c"}));
}

TEST(PythonUdfTest, AnImageLargerThanTheSegmentComesBackWhole) {
  // 64×64×3 uint8 in, 512×512×3 float64 out (6 MiB: the 1 MiB segment grows).
  const Tensor image = PatternImage(64, 64, 3);
  const Element out = ApplyUdf(
      kPython,
      ParamsFor("def f(image):\n  return np.kron(image.astype(np.float64), np.ones((8, 8, 1)))"),
      MakeElement({image}));
  ASSERT_EQ(out.tensors.size(), 1u);
  const Tensor& big = out.tensors[0];
  ASSERT_EQ(big.dtype(), DT_DOUBLE);
  ASSERT_EQ(big.shape(), (std::vector<int64_t>{512, 512, 3}));
  for (const auto& [y, x, c] : {std::tuple{0, 0, 0}, std::tuple{511, 511, 2}, std::tuple{300, 17, 1}}) {
    EXPECT_EQ(big.data<double>()[(y * 512 + x) * 3 + c],
              image.data<uint8_t>()[((y / 8) * 64 + x / 8) * 3 + c])
        << y << "," << x << "," << c;
  }
}

TEST(PythonUdfTest, TheRngIsKeyedByTheElementsRandomKey) {
  const std::string params = ParamsFor("def f(x, rng):\n  return rng.integers(0, 1 << 62)");
  const Element in = MakeElement({Tensor::Scalar<int64_t>(1)});
  const int64_t a = *ApplyUdf(kPython, params, in, /*key=*/7).tensors[0].data<int64_t>();
  const int64_t again = *ApplyUdf(kPython, params, in, /*key=*/7).tensors[0].data<int64_t>();
  const int64_t other = *ApplyUdf(kPython, params, in, /*key=*/8).tensors[0].data<int64_t>();
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
}

TEST(PythonUdfTest, WhatTheFunctionPrintsDoesNotDisturbItsAnswers) {
  const Element out =
      ApplyUdf(kPython, ParamsFor("def f(x):\n  print('hello from f', x)\n  return x + 1"),
               MakeElement({Tensor::Scalar<int64_t>(1)}));
  ASSERT_EQ(out.tensors.size(), 1u);
  EXPECT_EQ(*out.tensors[0].data<int64_t>(), 2);
}

TEST(PythonUdfTest, AnExceptionIsInvalidArgumentWithTheTraceback) {
  const absl::Status status =
      UdfError(kPython, ParamsFor("def f(x):\n  raise ValueError(f'bad record {int(x)}')"),
               MakeElement({Tensor::Scalar<int64_t>(17)}));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("Traceback"));
  EXPECT_THAT(status.message(), HasSubstr("ValueError: bad record 17"));
}

TEST(PythonUdfTest, AResultAnElementCannotHoldIsAnErrorNamingTheDtype) {
  const absl::Status status =
      UdfError(kPython, ParamsFor("def f(x):\n  return np.complex64(1j)"),
               MakeElement({Tensor::Scalar<int64_t>(1)}));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("complex64"));
}

TEST(PythonUdfTest, ACallPastItsTimeoutIsKilledAndTheNextCallRuns) {
  const std::unique_ptr<Udf> udf =
      Made(kPython, ParamsFor("def f(x):\n  if x == 1:\n    time.sleep(60)\n  return os.getpid()",
                              /*timeout_ms=*/500));
  ASSERT_NE(udf, nullptr);
  Element stuck = MakeElement({Tensor::Scalar<int64_t>(1)});
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = udf->Map(stuck, UdfCall{});
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("did not return within 500ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  Element next = MakeElement({Tensor::Scalar<int64_t>(2)});
  ASSERT_TRUE(udf->Map(next, UdfCall{}).ok());
  EXPECT_TRUE(ProcessExists(*next.tensors[0].data<int64_t>()));
}

TEST(PythonUdfTest, AHelperThatDiesIsReplacedAndTheElementComputedAgain) {
  testing::ScopedTempDir dir;
  const std::string marker = dir.Join("died-once");
  const std::unique_ptr<Udf> udf = Made(
      kPython, ParamsFor(absl::StrCat("def f(x):\n  if not os.path.exists('", marker,
                                      "'):\n    open('", marker,
                                      "', 'w').close()\n    os._exit(3)\n  return x * 10")));
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Scalar<int64_t>(4)});
  const absl::Status status = udf->Map(element, UdfCall{});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the first helper did not run the function";
  EXPECT_EQ(*element.tensors[0].data<int64_t>(), 40);
}

TEST(PythonUdfTest, AHelperKilledBetweenCallsIsReplacedWithoutHarmingTheProcess) {
  const std::unique_ptr<Udf> udf = Made(kPython, ParamsFor("def f(x):\n  return os.getpid()"));
  ASSERT_NE(udf, nullptr);
  Element first = MakeElement({Tensor::Scalar<int64_t>(0)});
  ASSERT_TRUE(udf->Map(first, UdfCall{}).ok());
  const int64_t killed = *first.tensors[0].data<int64_t>();
  ASSERT_EQ(::kill(static_cast<pid_t>(killed), SIGKILL), 0);
  // Writing the next request to the dead helper fails (no SIGPIPE ends this process); the call
  // runs on a new helper.
  Element second = MakeElement({Tensor::Scalar<int64_t>(0)});
  const absl::Status status = udf->Map(second, UdfCall{});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_NE(*second.tensors[0].data<int64_t>(), killed);
}

TEST(PythonUdfTest, AHelperThatDiesTwiceOnAnElementIsAnErrorSayingHowItEnded) {
  const absl::Status status = UdfError(kPython, ParamsFor("def f(x):\n  os._exit(3)"),
                                       MakeElement({Tensor::Scalar<int64_t>(4)}));
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("exited with code 3"));
  EXPECT_THAT(status.message(), HasSubstr("died on the same element too"));
}

TEST(PythonUdfTest, ConcurrentCallsRunInHelpersOfTheirOwnAndNoneOutlivesTheUdf) {
  std::unique_ptr<Udf> udf =
      Made(kPython, ParamsFor("def f(x):\n  time.sleep(0.5)\n  return os.getpid()"));
  ASSERT_NE(udf, nullptr);
  std::vector<Element> elements(4, MakeElement({Tensor::Scalar<int64_t>(0)}));
  std::vector<std::thread> threads;
  std::vector<absl::Status> statuses(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) {
    threads.emplace_back([&, i] { statuses[i] = udf->Map(elements[i], UdfCall{}); });
  }
  for (std::thread& t : threads) t.join();
  std::set<int64_t> pids;
  for (size_t i = 0; i < elements.size(); ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    pids.insert(*elements[i].tensors[0].data<int64_t>());
  }
  EXPECT_GE(pids.size(), 2u) << "concurrent calls shared one helper";
  udf.reset();
  for (int64_t pid : pids) EXPECT_FALSE(ProcessExists(pid)) << "helper " << pid << " outlived";
}

TEST(PythonUdfTest, AFilterKeepsWhatTheFunctionAccepts) {
  const std::unique_ptr<Udf> udf = Made(kPythonFilter, ParamsFor("def f(x):\n  return x % 2 == 0"));
  ASSERT_NE(udf, nullptr);
  for (int64_t value : {0, 1, 2, 7}) {
    absl::StatusOr<bool> keep = udf->Keep(MakeElement({Tensor::Scalar<int64_t>(value)}), UdfCall{});
    ASSERT_TRUE(keep.ok()) << keep.status();
    EXPECT_EQ(*keep, value % 2 == 0) << value;
  }
}

// A function that draws from an unseeded generator: another result at each call.
constexpr char kUnseeded[] = "def f(x):\n  return x + np.random.default_rng().integers(1 << 60)";

TEST(PythonUdfTest, ANonDeterministicMapIsCaughtOnItsFirstCall) {
  const std::unique_ptr<Udf> udf = Made(kPython, ParamsFor(kUnseeded));
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Scalar<int64_t>(1)});
  const absl::Status status = udf->Map(element, UdfCall{.random_key = 5});
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("returned different arrays"));
  EXPECT_THAT(status.message(), HasSubstr("not deterministic"));
  EXPECT_THAT(status.message(), HasSubstr("determinism_check_every=0"));
}

TEST(PythonUdfTest, TheCheckComesBackOnceInDeterminismCheckEveryCalls) {
  // Checked calls: the first (0) and then one in 3 (3, 6, ...). The function is deterministic
  // on the others' elements only, so calls 1, 2, 4 and 5 pass and 3 fails.
  const std::unique_ptr<Udf> udf = Made(
      kPython,
      ParamsFor("def f(x):\n  return x if x < 100 else x + np.random.default_rng().integers(1 << 40)",
                0, R"("determinism_check_every": 3)"));
  ASSERT_NE(udf, nullptr);
  const std::vector<int64_t> values = {1, 2, 3, 100, 101, 102, 5};
  for (size_t call = 0; call < values.size(); ++call) {
    Element element = MakeElement({Tensor::Scalar<int64_t>(values[call])});
    const absl::Status status = udf->Map(element, UdfCall{});
    // Call 6 is checked too, on a deterministic element: it passes.
    if (call == 3) {
      EXPECT_TRUE(absl::IsFailedPrecondition(status)) << "call " << call << ": " << status;
    } else {
      EXPECT_TRUE(status.ok()) << "call " << call << ": " << status;
    }
  }
}

TEST(PythonUdfTest, ADeterministicFunctionWithItsRngPassesEveryCheck) {
  const std::unique_ptr<Udf> udf =
      Made(kPython, ParamsFor("def f(x, rng):\n  return x + rng.integers(0, 1 << 40)", 0,
                              R"("determinism_check_every": 1)"));
  ASSERT_NE(udf, nullptr);
  for (int64_t value = 0; value < 5; ++value) {
    Element element = MakeElement({Tensor::Scalar<int64_t>(value)});
    const absl::Status status = udf->Map(element, UdfCall{.random_key = static_cast<uint64_t>(value)});
    EXPECT_TRUE(status.ok()) << value << ": " << status;
  }
}

TEST(PythonUdfTest, WithTheCheckOffANonDeterministicFunctionRuns) {
  const std::unique_ptr<Udf> udf =
      Made(kPython, ParamsFor(kUnseeded, 0, R"("determinism_check_every": 0)"));
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Scalar<int64_t>(1)});
  EXPECT_TRUE(udf->Map(element, UdfCall{}).ok());
}

TEST(PythonUdfTest, ANonDeterministicFilterIsCaught) {
  const std::unique_ptr<Udf> udf = Made(
      kPythonFilter,
      ParamsFor("def f(x):\n  return bool(np.random.default_rng().integers(2))", 0,
                R"("determinism_check_every": 1)"));
  ASSERT_NE(udf, nullptr);
  // Each checked call fails with probability 1/2: of 40, all passing is a 2^-40 chance.
  int caught = 0;
  for (int call = 0; call < 40; ++call) {
    const absl::StatusOr<bool> keep = udf->Keep(MakeElement({Tensor::Scalar<int64_t>(call)}), UdfCall{});
    if (!keep.ok()) {
      EXPECT_TRUE(absl::IsFailedPrecondition(keep.status())) << keep.status();
      EXPECT_THAT(keep.status().message(), HasSubstr("decided differently"));
      ++caught;
    }
  }
  EXPECT_GT(caught, 0);
}

TEST(PythonUdfTest, WithoutPermissionBuildingOneIsPermissionDeniedNamingTheFlag) {
  const auto made = MakeUdf(kPythonNotAllowed, ParamsFor("def f(x):\n  return x"));
  EXPECT_TRUE(absl::IsPermissionDenied(made.status())) << made.status();
  EXPECT_THAT(made.status().message(), HasSubstr("--allow_python_udfs"));
}

TEST(PythonUdfTest, BadParamsAreRefusedNamingThem) {
  const auto not_base64 = MakeUdf(kPython, R"({"function": "not base64!"})");
  EXPECT_TRUE(absl::IsInvalidArgument(not_base64.status())) << not_base64.status();
  EXPECT_THAT(not_base64.status().message(), HasSubstr("function"));
  const auto no_time = MakeUdf(kPython, ParamsFor("def f(x):\n  return x", /*timeout_ms=*/0));
  EXPECT_TRUE(no_time.ok()) << "no timeout_ms: the default";
  const auto zero = MakeUdf(kPython, R"({"function": "AAAA", "timeout_ms": 0})");
  EXPECT_TRUE(absl::IsInvalidArgument(zero.status())) << zero.status();
  EXPECT_THAT(zero.status().message(), HasSubstr("timeout_ms"));
  const auto negative = MakeUdf(kPython, R"({"function": "AAAA", "determinism_check_every": -1})");
  EXPECT_TRUE(absl::IsInvalidArgument(negative.status())) << negative.status();
  EXPECT_THAT(negative.status().message(), HasSubstr("determinism_check_every"));
  const auto not_a_pickle = MakeUdf(kPython, R"({"function": "AAAA"})");
  ASSERT_TRUE(not_a_pickle.ok()) << "decodes: its helper finds out";
  Element element = MakeElement({Tensor::Scalar<int64_t>(1)});
  const absl::Status status = (*not_a_pickle)->Map(element, UdfCall{});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("does not load"));
}

}  // namespace
}  // namespace granary::udf_test
