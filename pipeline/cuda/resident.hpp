// The GPU path for jobs that fit the GPUs' memory: one round trip instead of DSPS's two.
#pragma once

#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/device.hpp"
#include "pipeline/executor.hpp"

#include <vector>

namespace gpusort::detail {

/// Smallest share worth a GPU of its own: below it, the splitter search and the exchange cost
/// more than a second link saves.
inline constexpr std::uint64_t min_resident_share_bytes = std::uint64_t{64} << 20;

/// The GPUs (a prefix of `gpus`) that sort `n` elements in one round trip, or none when the job
/// does not fit them.
std::vector<cuda_device*> resident_gpus(std::uint64_t n, const element_layout& layout,
                                        const std::vector<cuda_device*>& gpus);

/// Sorts a job that fits the GPUs in one round trip. Every GPU takes an equal share and sorts it in
/// pieces as they arrive (the copy-in of piece k+1 overlaps the sort of piece k), each piece a
/// sorted run where it arrived, with one piece-sized work array as the sort's alternate. The
/// output is then cut into ranges: each GPU's output partition holds its input share's ranks,
/// in ranges of at most a ring buffer; exact splits by rank (a search over key values, every
/// run's keys counted on its GPU, 15 candidates a bound at a time) say which part of every run,
/// on every GPU, each range takes.
/// Each GPU merges its ranges one after another into a ring of three range buffers carved from
/// the work array (parts on other GPUs come over peer to peer first, NVLink where present;
/// pairwise merges, level by level, stable), and copies each out while the next one merges, so
/// that the time approaches N / B_h2d + N / B_d2h and a GPU holds about 1.0625 times its share
/// (core/plan/tuning.hpp resident_tuning). Each GPU stores from a thread of its own, so that
/// staged copy-outs (files, pageable arrays) run side by side. The output is written only after
/// every input element is on a GPU, so an in-place job fails or is cancelled with its input
/// untouched up to then; a cancel after that comes too late and the job finishes. An in-place
/// job whose merges or copy-out fail runs them again (twice at most, with a warning) from the
/// sorted runs, which they never write, and succeeds: ranges already out would otherwise hold
/// sorted pairs and the rest original ones, some pairs twice and others lost. Only a lost
/// device (a sticky CUDA error), whose memory is gone, or a failure that repeats, leaves the
/// arrays so; its error says so.
execution_stats sort_resident(const job_arrays& a, const element_layout& layout,
                              const std::vector<cuda_device*>& gpus, job_context& ctx);

}  // namespace gpusort::detail
