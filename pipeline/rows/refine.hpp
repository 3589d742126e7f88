// The stable permutation that sorts rows by their words (core/rows/row_words.hpp): the engine
// argsorts every row's first word, and the rows still tied are put in order by their next
// words, group by group: small groups on the host's cores, large ones by the engine again.
// Random keys tie rarely past their first word, so a sort of rows costs about one argsort of
// 64-bit keys; rows that tie word after word cost one argsort of their rows per word.
#pragma once

#include "core/rows/row_words.hpp"

#include <gpusort/gpusort.hpp>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpusort::detail {

/// The host's stages of a rows job (keys to words, ties, the records' move), timed where
/// sort_options::profile asks: device "all", round 0, each with its start from the job's start,
/// beside the engine's own stages of its sorts. Off, it only runs the stages.
class host_stages {
 public:
  explicit host_stages(bool on) : on_{on} {}

  template <typename F>
  decltype(auto) run(const char* stage, std::uint64_t bytes, F&& f)
  {
    if (!on_) return std::forward<F>(f)();
    const double from = seconds();
    struct record {
      host_stages& self;
      const char* stage;
      std::uint64_t bytes;
      double from;
      ~record() { self.add(stage, bytes, from, self.seconds()); }
    } r{*this, stage, bytes, from};
    return std::forward<F>(f)();
  }

  /// The stages so far, after `report`'s own (the engine's).
  void append_to(sort_report& report) const
  {
    report.profile.insert(report.profile.end(), stages_.begin(), stages_.end());
  }

 private:
  [[nodiscard]] double seconds() const
  {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void add(const char* stage, std::uint64_t bytes, double from, double to)
  {
    stages_.push_back(stage_profile{.device = "all",
                                    .round = 0,
                                    .stage = stage,
                                    .chunks = 1,
                                    .bytes = bytes,
                                    .busy_seconds = to - from,
                                    .first_start = 0,
                                    .last_end = to - from,
                                    .round_start = from,
                                    .steps = {}});
  }

  bool on_;
  std::chrono::steady_clock::time_point start_{std::chrono::steady_clock::now()};
  std::vector<stage_profile> stages_;
};

struct rows_tuning {
  /// Tied groups of at least this many rows go to the engine, one after another; smaller ones
  /// are sorted on the host's cores side by side (about 0.1 s for 2^20 pairs on one core).
  std::uint64_t engine_group_rows{std::uint64_t{1} << 20};
};

/// perm receives the stable sorting permutation of words' rows [0, count). Index: uint32_t
/// (count < 2^32) or uint64_t. options.host_memory_limit, when set, bounds the host memory of
/// the words, their sorted copies and the engine's sorts together (a config_error where the
/// words alone need more). Returns the report of the engine's sort of the first words; `stages`,
/// when given, times the host's stages.
template <typename Index>
sort_report argsort_words(engine& engine, const row_words& words, std::uint64_t count,
                          Index* perm, const sort_options& options,
                          const rows_tuning& tuning = {}, host_stages* stages = nullptr);

}  // namespace gpusort::detail
