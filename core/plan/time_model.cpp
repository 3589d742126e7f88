#include "core/plan/time_model.hpp"
#include "core/host_threads.hpp"
#include "core/plan/tuning.hpp"

#include <algorithm>
#include <cmath>

namespace gpusort {

// Every H200 number below was measured on the hosts of bench/results unless its comment says it
// is a fit or a guess. Where two hosts differ, the comment says which one the default takes.
machine_model machine_model::h200(std::uint32_t gpus)
{
  return machine_model{
      .name = "H200",
      .gpus = gpus,
      // One H200 (h200-20261129-chunks/call4/chunks.txt), registered memory: 55.4-55.5 GB/s
      // alone, 49.9-50.3 each way at once. The two-H200 host measured 55.0-55.2 alone and
      // 44.8-47.1 at once (h200x2-20261129/call1.txt): there the host memory bounds the pair
      // first (host_copy below), so the one-GPU figure stands for both.
      .link_in = 55.5,
      .link_out = 55.4,
      .link_both = 50.3,
      // The two-H200 host, 32 cores: parallel memcpy 69.8 GB/s (139.6 read plus written),
      // h200x2-20261129/call1.txt. The one-H200 host's 16 cores copy about 47 (design.md 5).
      .host_copy = 69.8,
      // A fit: both H200s out of core (h200x2-20261129-s7/call1), each round moved 32 GiB in
      // and 32 GiB out in about 0.49 s (8 GiB: 0.12 s), 36-38 GB/s per GPU each way: the
      // host's memory served 144-151 GB/s to the copy engines, where twice its memcpy rate
      // (139.6; about 122 from gpu_bench's own memcpy in that run) had predicted 1.175-1.207x.
      .host_dma = 148,
      // A fit, not a measurement: the two-H200 fitting jobs less their copies, sort and merges
      // leave 0.040 and 0.057 s of exchange at 8 and 32 GiB in one run (h200x2-20261129) and
      // 0.014 and 0.075 s in another (h200x2-20261129-s7/call1; the jobs took 0.206 and 0.723,
      // then 0.181 and 0.744 s); 227 GB/s and 15 ms fixed (exchange_seconds) fit their means.
      // No NVLink rate was measured alone.
      .peer = 227,
      // Busy rates of the in-core sort of u64 chunks on one H200: 116-131 GB/s in round 1,
      // 198-217 in round 2 (chunks.txt); the middle.
      .sort_rate = 150,
      // A guess: about 60% of the H200's 4.8 TB/s for a merge pass. Its terms are a few
      // hundredths of a second at 32 GiB.
      .device_memory_rate = 3000,
      // A fit of round 2 at 1/256 through the warp-a-slice gather kernel, one H200
      // (h200x2-20261130-s10 call 2): 1572 chunks of 21.8 MB took 1.283 s (32 GiB), 1594 of
      // 5.4 MB 0.35-0.39 s (8 GiB): per slice 18 ns plus its bytes at 28 GB/s. The round, not
      // the copy stage alone (busy 1.024 and 0.26-0.30 s, at 33-34 GB/s): the sort beside a
      // kernel reading mapped memory runs 1.5-2.6x slower than round 1's (design.md, "Many
      // chunks"), and the stages overlap less. At d = 4096 it predicts 147 us a chunk where
      // 129-134 us were measured (call 4), there bound by that slowed sort.
      .gather_rate = 28,
      // A fit: round 1's sort stage at d = 4096 (2 MiB chunks) was busy 0.456 s, 111 us a
      // chunk of which about 14 us is its bytes (chunks.txt): launches and events.
      .chunk_seconds = 100e-6,
      .slice_seconds = 18e-9,
      // Fits of the round-2 plan on the two-H200 host's 32 cores (h200x2-20261130-s10): the
      // usual 2^20 candidates read and sorted in 0.008-0.010 s (the bound's 7.45M took 0.098
      // s, 13 ns each, h200x2-20261130-s9); 2.54M cuts at d = 1594 in 0.028-0.052 s and 16.7M
      // at d = 4096 in 0.149-0.18 s. A job's candidates are the usual sample's where round 2
      // keeps it (cut_runs), as it does on keys that are not adversarial. Those plans dealt
      // into g = 1 bins: a cut is a search per chunk and splitter whatever g.
      .candidate_seconds = 10e-9,
      .cut_seconds = 11e-9,
      .exchange_seconds = 0.015,
      // A fit of the scattered rounds' round 1 on one H200, 8 GiB u64, with the bounds aligned
      // to the keys' top bits (h200-20261201-s19 call 1): 1594 chunks of 5.4 MB in 0.248 s,
      // 4096 of 2.1 MB in 0.376 s, 156 and 92 us a chunk: 19.4 us a MB (51.6 GB/s, above the
      // links' 48.3 that bound it here) and about 46 us a chunk. Its sort runs slower beside
      // the store's writes, which is what the round's time says, not the kernel's own rate.
      // (Unaligned, s18 call 4: 44 us and 29.2 GB/s, 0.365 and 0.474 s.)
      .scatter_seconds = 46e-6,
      .scatter_rate = 51.6,
      // A fit of the scattered rounds' round 2 on one H200 (the same runs): 2439 buckets of
      // 3.5 MB in 0.229 s, 94 us a bucket where the links would take 74 and the sort's bytes
      // 23 (at 1/256, 1626 of 5.3 MB in 0.202 s: there the links bound it). DSPS's 100 us a
      // chunk (chunk_seconds) had put it at 0.299 s.
      .bucket_seconds = 71e-6,
      .pinned = true,
      // 143771 MiB per H200 (nvidia-smi on the two-H200 host).
      .device_memory = std::uint64_t{143771} << 20,
  };
}

machine_model machine_model::host(unsigned threads)
{
  const double t = detail::host_threads_or_cores(threads);
  return machine_model{
      .name = "host",
      .gpus = 0,
      .link_in = 0,
      .link_out = 0,
      .link_both = 0,
      // The H100 host's 16 cores copied 61.4 GB/s together (h100-20261126-a2f6530-report):
      // 3.8 a core, up to that. Rough: a shared VM's cores copy less.
      .host_copy = std::min(3.8 * t, 61.4),
      .peer = 0,
      // The direct CPU path sorted 2^30 u64 in 3.131 s on 16 threads of the H100 host
      // (h100-20261126-c7701ff-cpu.txt): 0.17 GB/s a thread. On the shared 2-core VM it
      // went 0.05-0.2 GB/s a thread with others' builds beside it (dev2core-*-cpu.txt): the
      // CPU model is good to a factor of two at best.
      .sort_rate = 0.17 * t,
      .device_memory_rate = 0,
      .gather_rate = 0,
      // Guesses: a task's buffers and thread team; a slice's search and copy call.
      .chunk_seconds = 50e-6,
      .slice_seconds = 20e-9,
      // plan_bench on the 2-core VM: 100-120 ns a candidate, 54 ns a cut at d = 4096
      // (h200-20261129-chunks/notes.md); on 16 cores the H200 host's 25 and 18 ns. Scaled
      // by the cores between the two.
      .candidate_seconds = std::max(25e-9, 220e-9 / t),
      .cut_seconds = std::max(18e-9, 110e-9 / t),
      .exchange_seconds = 0,
      .pinned = true,
      .device_memory = 0,
  };
}

namespace detail {

namespace {

constexpr double giga = 1e9;

/// Bytes of host memory traffic per byte crossing a link: 1 for pinned memory (the DMA's own
/// read or write), 3 for pageable (the DMA, and the staging's copy between the user's pages
/// and the pinned pieces, read plus written). `extra`: other traffic of the phase per byte
/// (the lean path's evictions: one read and one write).
struct traffic {
  double in{1};
  double out{1};
  double extra{0};
};

/// Host memory's bytes a second for all GPUs together: read plus written.
double host_traffic(const machine_model& m)
{
  return (m.host_dma > 0 ? m.host_dma : 2 * m.host_copy) * giga;
}

/// Per GPU, each way, with both directions busy on all k GPUs: the link's rate at once, or the
/// host memory's share where k GPUs need more than it moves.
double both_rate(const machine_model& m, double k, traffic t)
{
  return std::min(m.link_both * giga, host_traffic(m) / (k * (t.in + t.out + t.extra)));
}
double in_rate(const machine_model& m, double k, traffic t)
{
  return std::min(m.link_in * giga, host_traffic(m) / (k * (t.in + t.extra)));
}
double out_rate(const machine_model& m, double k, traffic t)
{
  return std::min(m.link_out * giga, host_traffic(m) / (k * (t.out + t.extra)));
}

double sort_seconds(const machine_model& m, double bytes) { return bytes / (m.sort_rate * giga); }

/// One round of `tasks` tasks over k GPUs through the ring of three slots (copy in, sort, copy
/// out on three streams): every task costs its slowest stage, and the first task's copy in
/// and sort and the last one's copy out are not overlapped with anything (the fill and drain,
/// about T/d: design.md section 3). Tasks are spread evenly over the GPUs.
double ring_round(double tasks, double k, double first_in, double in, double sort, double out,
                  double last_out)
{
  const double per_gpu = std::ceil(tasks / k);
  return first_in + sort + last_out + (per_gpu - 1) * std::max({in, sort, out});
}

/// The scattered rounds on GPUs (core/plan/scatter_buckets.hpp): the sample read and sorted on
/// the host, round 1 at the fitted scatter cost a chunk (its sort and the writes of its slices
/// together), nothing planned between the rounds, and round 2 one whole bucket a task through
/// the copy engines, as a round of chunks of the buckets' size.
model_prediction gpu_scattered(const machine_model& m, const model_job& j)
{
  model_prediction p;
  const double k = std::max<std::uint32_t>(j.devices, 1);
  const double bytes = static_cast<double>(j.n) * static_cast<double>(j.element_bytes());
  const double d = static_cast<double>(j.d);
  const double chunk = bytes / d;
  const double pageable = m.pinned ? 1 : 3;
  p.phases.push_back({"sample", static_cast<double>(j.candidates) * m.candidate_seconds});
  const traffic t1{.in = pageable, .out = 1};
  const double r1 = both_rate(m, k, t1) * model_tuning::ring_link_efficiency;
  // The writes share the host's memory with every GPU's copies, as a copy-out would.
  const double scatter =
      m.scatter_seconds + chunk / std::min(m.scatter_rate * giga, r1);
  p.phases.push_back({"round 1", ring_round(d, k, chunk / in_rate(m, k, t1), chunk / r1,
                                            scatter, scatter, scatter)});
  const double buckets = static_cast<double>(j.buckets);
  const double bucket = bytes / buckets;
  const traffic t2{.in = 1, .out = pageable};
  const double r2 = both_rate(m, k, t2) * model_tuning::ring_link_efficiency;
  const double sort_stage =
      sort_seconds(m, bucket) + (m.bucket_seconds > 0 ? m.bucket_seconds : m.chunk_seconds);
  p.phases.push_back({"round 2", ring_round(buckets, k, bucket / in_rate(m, k, t2), bucket / r2,
                                            sort_stage, bucket / r2,
                                            bucket / out_rate(m, k, t2))});
  return p;
}

model_prediction gpu_two_rounds(const machine_model& m, const model_job& j)
{
  if (j.buckets > 0 && m.scatter_rate > 0) return gpu_scattered(m, j);
  const double k = std::max<std::uint32_t>(j.devices, 1);
  const double bytes = static_cast<double>(j.n) * static_cast<double>(j.element_bytes());
  const double d = static_cast<double>(j.d);
  const double g = static_cast<double>(j.g);
  const double chunk = bytes / d;
  const double pageable = m.pinned ? 1 : 3;
  const bool lean = j.path == model_path::lean;
  model_prediction p;
  // Round 1: the caller's array in (staged where pageable), the dealt runs out to the
  // round-1 buffer, which an engine keeps pinned. The lean path's round-1 output is the room
  // and the array itself, written by the copy engines through the staging as any array.
  const traffic t1{.in = pageable, .out = lean ? pageable : 1};
  const double r1 = both_rate(m, k, t1) * model_tuning::ring_link_efficiency;
  const double sort_stage = sort_seconds(m, chunk) + m.chunk_seconds;
  // Chunks that share a ring slot sort side by side on lanes: their launches overlap.
  const double lane_stage =
      sort_seconds(m, chunk) +
      m.chunk_seconds * (j.lanes > 1 ? model_tuning::lane_chunk_share : 1.0);
  p.phases.push_back({"round 1", ring_round(d, k, chunk / in_rate(m, k, t1), chunk / r1,
                                            lane_stage, chunk / r1,
                                            chunk / out_rate(m, k, t1))});
  // Between the rounds the host reads and sorts the candidates and cuts the d * g runs at
  // d - 1 splitters (design.md section 3, "Many chunks"): a search per chunk and splitter,
  // the chunk's other bins following from bin 0's cut in log2 g keys (slice_dealt_runs).
  const double cuts = d * (d - 1);
  p.phases.push_back({"planning", static_cast<double>(j.candidates) * m.candidate_seconds +
                                      cuts * m.cut_seconds});
  // Round 2: each final chunk gathers d * g slices from the round-1 buffer, sorts them and
  // writes them to the output. Slices averaging below 256 KiB go through the gather kernel
  // reading mapped memory (round_load.cpp), larger ones through the copy engines.
  // The lean path's evictions move the round's bytes once more on the host (read and write).
  const traffic t2{.in = lean ? pageable : 1, .out = pageable, .extra = lean ? 2.0 : 0.0};
  const double r2 = both_rate(m, k, t2) * model_tuning::ring_link_efficiency;
  const double slices = d * g;
  const double slice_bytes = chunk / slices;
  // The round-1 buffer is the engine's, pinned and mapped, whatever the caller's arrays are;
  // the lean path's is the caller's array and the room, mapped only where they are pinned.
  const bool mapped = !lean || m.pinned;
  const double gather_rate = slice_bytes < model_tuning::kernel_gather_below_bytes && mapped
                                 ? std::min(m.gather_rate * giga, r2)
                                 : r2;
  const double in2 = chunk / gather_rate + slices * m.slice_seconds;
  p.phases.push_back({"round 2", ring_round(d, k, in2, in2, sort_stage, chunk / r2,
                                            chunk / out_rate(m, k, t2))});
  return p;
}

model_prediction gpu_resident(const machine_model& m, const model_job& j)
{
  const double k = std::max<std::uint32_t>(j.devices, 1);
  const double bytes = static_cast<double>(j.n) * static_cast<double>(j.element_bytes());
  const double share = bytes / k;
  const double pageable = m.pinned ? 1 : 3;
  const traffic t{.in = pageable, .out = pageable};
  const double device = m.device_memory_rate * giga;
  model_prediction p;
  // Every copy in ends before any copy out starts (the caller's arrays are written only in
  // the final stage: design.md section 3), so each direction runs alone.
  p.phases.push_back({"copy in", share / in_rate(m, k, t)});
  // Pieces sort as they arrive: only the last one's sort follows the copy.
  const auto share_elements = static_cast<std::uint64_t>(static_cast<double>(j.n) / k);
  const resident_tuning tuning;
  const double piece = static_cast<double>(tuning.piece_elements(share_elements)) *
                       static_cast<double>(j.element_bytes());
  const double runs = std::ceil(share / std::max(piece, 1.0)) * k;
  p.phases.push_back({"sort", sort_seconds(m, piece)});
  // The ranges' cuts (a search over every run's keys), then each range merged from every run's
  // part of it (pulled from the other GPUs first) while the range before copies out: the
  // copy-out, or where slower the merges and pulls, and the first range's merges before it.
  const double levels = std::ceil(std::log2(std::max(runs, 1.0)));
  const double range = static_cast<double>(tuning.range_elements(share_elements)) *
                       static_cast<double>(j.element_bytes());
  const double merges = levels * 2 * share / device + share * (k - 1) / k / (m.peer * giga);
  p.phases.push_back({"ranges cut", m.exchange_seconds + levels * 2 * range / device});
  p.phases.push_back({"copy out", std::max(share / out_rate(m, k, t), merges)});
  return p;
}

/// The host device: each task's gather, sort and deal or write on the cores, one task after
/// another (the sort takes every core), the copies at the host's copy rate.
model_prediction host_device(const machine_model& m, const model_job& j)
{
  const double bytes = static_cast<double>(j.n) * static_cast<double>(j.element_bytes());
  const double copy = bytes / (m.host_copy * giga);
  const double d = static_cast<double>(j.d);
  const double g = static_cast<double>(j.g);
  model_prediction p;
  switch (j.path) {
    case model_path::direct:
      // In place with the CPU sort (its own buffer as large as the data).
      p.phases.push_back({"sort", sort_seconds(m, bytes)});
      break;
    case model_path::in_core:
    case model_path::resident:
      p.phases.push_back({"copy in", copy});
      p.phases.push_back({"sort", sort_seconds(m, bytes) + m.chunk_seconds});
      p.phases.push_back({"copy out", copy});
      break;
    case model_path::two_rounds:
    case model_path::lean: {
      const double moves = j.path == model_path::lean ? copy : 0;
      p.phases.push_back({"round 1", 2 * copy + sort_seconds(m, bytes) + d * m.chunk_seconds});
      p.phases.push_back({"planning", static_cast<double>(j.candidates) * m.candidate_seconds +
                                          d * (d - 1) * m.cut_seconds});
      p.phases.push_back({"round 2", 2 * copy + moves + sort_seconds(m, bytes) +
                                         d * m.chunk_seconds + d * d * g * m.slice_seconds});
      break;
    }
  }
  return p;
}

}  // namespace

std::uint32_t resident_share_gpus(std::uint64_t n, std::uint64_t element_bytes,
                                  std::uint32_t gpus) noexcept
{
  const std::uint64_t worth = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(model_tuning::min_resident_share_bytes) /
             std::max<std::uint64_t>(element_bytes, 1));
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(n / worth, 1, std::max<std::uint32_t>(gpus, 1)));
}

model_prediction predict(const machine_model& m, const model_job& j)
{
  model_prediction p;
  if (j.n == 0) return p;
  if (m.gpus == 0) {
    p = host_device(m, j);
  } else if (j.path == model_path::two_rounds || j.path == model_path::lean) {
    p = gpu_two_rounds(m, j);
  } else {
    // resident, or one in-core chunk on a GPU the resident buffers do not fit: one round trip
    p = gpu_resident(m, j);
  }
  if (j.stable_value_bytes > 0) {
    // A guess: the host gathers the values by the sorted positions (reads at random, about
    // a quarter of its copy rate) into a copy and back.
    const double values = static_cast<double>(j.n) * j.stable_value_bytes;
    p.phases.push_back({"values gathered", 4 * values / (m.host_copy * giga)});
  }
  for (const plan_phase& phase : p.phases) p.seconds += phase.seconds;
  return p;
}

}  // namespace detail
}  // namespace gpusort
