// The executor's scheduling over several devices, and its behaviour when a device fails.
#include "core/generate.hpp"
#include "core/verify.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/host_device.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace gpusort::detail {
namespace {

/// A host device that counts the tasks it ran and can fail at its k-th task of a round. A
/// failing device raises `failed`; a device given `wait_for` holds back in round `hold_round`
/// until that flag is up (at most 60 s, for loaded machines), so that the failing device
/// reaches its k-th task however the threads are scheduled.
class probe_device final : public device {
 public:
  probe_device(std::uint64_t budget, int index, int fail_round = 0, int fail_at = -1,
               std::atomic<bool>* failed = nullptr, int hold_round = 0,
               const std::atomic<bool>* wait_for = nullptr)
      : inner_{budget, 1, index},
        fail_round_{fail_round},
        fail_at_{fail_at},
        failed_{failed},
        hold_round_{hold_round},
        wait_for_{wait_for}
  {
  }
  [[nodiscard]] std::string name() const override { return inner_.name(); }
  [[nodiscard]] device_capacity capacity(const element_layout& l) const override
  {
    return inner_.capacity(l);
  }
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override
  {
    ++round_;
    if (round_ == hold_round_ && wait_for_ != nullptr) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
      while (!wait_for_->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    int ran = 0;
    // Take one task at a time through a single-task queue so the failure lands mid-round.
    while (const chunk_task* t = queue.pop()) {
      if (round_ == fail_round_ && ran == fail_at_) {
        if (failed_ != nullptr) failed_->store(true);
        throw cuda_error{"injected device failure"};
      }
      std::vector<chunk_task> one{*t};
      task_queue single{std::move(one)};
      inner_.process(layout, single, ctx);
      ++ran;
      tasks_.fetch_add(1);
    }
  }
  [[nodiscard]] int tasks() const { return tasks_.load(); }

 private:
  host_device inner_;
  int fail_round_;
  int fail_at_;
  std::atomic<bool>* failed_;
  int hold_round_;
  const std::atomic<bool>* wait_for_;
  int round_{};
  std::atomic<int> tasks_{0};
};

TEST(Executor, SeveralDevicesShareTheChunks)
{
  const std::uint64_t n = 2'000'000;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::staggered, 9);
  const key_array view{keys.data(), n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  std::vector<std::unique_ptr<probe_device>> owned;
  std::vector<device*> devs;
  for (int i = 0; i < 3; ++i) {
    owned.push_back(std::make_unique<probe_device>(std::uint64_t{4} << 20, i));
    devs.push_back(owned.back().get());
  }
  const element_layout layout{.type = dtype::u64, .key_bytes = 8};
  const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
  ASSERT_GE(plan.d, 8U);
  sort_options opt;
  job_context ctx{opt, 8};
  const execution_stats stats =
      execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan, devs, ctx);
  EXPECT_EQ(stats.rounds, 2);
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
  int total = 0;
  for (const auto& d : owned) total += d->tasks();
  EXPECT_EQ(total, static_cast<int>(2 * plan.d));
}

TEST(Executor, AFailingDeviceFailsTheJobAndRestoresAnInPlaceInput)
{
  for (const int fail_round : {1, 2}) {
    const std::uint64_t n = 1'000'000;
    std::vector<float> keys(n);
    generate(std::span<float>{keys}, distribution::uniform, 10);
    const std::vector<float> original = keys;
    const key_array view{keys.data(), n, dtype::f32};
    const fingerprint before = fingerprint_of(view);
    std::atomic<bool> failed{false};
    probe_device good{std::uint64_t{2} << 20, 0, 0, -1, nullptr, fail_round, &failed};
    probe_device bad{std::uint64_t{2} << 20, 1, fail_round, 1, &failed};
    std::vector<device*> devs{&good, &bad};
    const element_layout layout{.type = dtype::f32, .key_bytes = 4};
    const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
    sort_options opt;
    job_context ctx{opt, 4};
    EXPECT_THROW(execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan,
                         devs, ctx),
                 cuda_error);
    if (fail_round == 1)
      EXPECT_EQ(keys, original) << "round 1 never writes the input";
    else
      EXPECT_EQ(fingerprint_of(view), before) << "round 2 failures restore the elements";
  }
}

}  // namespace
}  // namespace gpusort::detail
