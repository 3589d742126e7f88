// A blocking hand-over queue between the pipeline's stage threads; close() wakes everyone.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace gpusort::detail {

template <typename T>
class stage_queue {
 public:
  void push(T v)
  {
    {
      const std::lock_guard lock{mutex_};
      items_.push_back(std::move(v));
    }
    cv_.notify_one();
  }
  /// The next item, or nullopt once the queue is closed and empty.
  std::optional<T> pop()
  {
    std::unique_lock lock{mutex_};
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    return v;
  }
  void close()
  {
    {
      const std::lock_guard lock{mutex_};
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_{};
};

}  // namespace gpusort::detail
