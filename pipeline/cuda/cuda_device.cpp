#include "pipeline/cuda/cuda_device.hpp"

#include "core/cpu_sort.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/stage_queue.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

constexpr std::uint32_t max_slices_per_launch = 65535;

/// The runtime's view of `p` when it lies in page-locked host memory, else nullopt.
std::optional<cudaPointerAttributes> pinned_attributes(const void* p) noexcept
{
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  if (a.type != cudaMemoryTypeHost) return std::nullopt;
  return a;
}

/// One chunk's place in the ring: its device buffers, its gather tables and its events.
struct slot {
  cuda::device_buffer keys;
  cuda::device_buffer values;
  cuda::pinned_buffer key_table_host;
  cuda::pinned_buffer value_table_host;
  cuda::device_buffer key_table;
  cuda::device_buffer value_table;
  cuda::cuda_event loaded;
  cuda::cuda_event computed;
  const chunk_task* task{};
};

/// Pinned pieces through which one direction stages memory the engine did not pin: the host
/// copies one piece while the copy engine moves another.
class staging {
 public:
  staging(std::uint64_t piece_bytes, unsigned pieces) : piece_bytes_{piece_bytes}
  {
    for (unsigned i = 0; i < pieces; ++i) {
      pieces_.emplace_back(piece_bytes, cudaHostAllocPortable);
      done_.emplace_back();
      in_use_.push_back(false);
    }
  }

  /// Host -> device through the pieces; returns once the last piece is queued.
  void copy_in(char* d_dst, const char* src, std::uint64_t bytes, cudaStream_t s)
  {
    for (std::uint64_t off = 0; off < bytes; off += piece_bytes_) {
      const std::uint64_t len = std::min(piece_bytes_, bytes - off);
      const auto i = static_cast<std::size_t>(next_++ % pieces_.size());
      if (in_use_[i]) done_[i].synchronize();  // the piece's last copy has left it
      parallel_copy(pieces_[i].data(), src + off, len);
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(d_dst + off, pieces_[i].data(), len, cudaMemcpyHostToDevice, s));
      done_[i].record(s);
      in_use_[i] = true;
    }
  }

  /// Device -> host through the pieces; returns once every byte is in `dst`.
  void copy_out(char* dst, const char* d_src, std::uint64_t bytes, cudaStream_t s)
  {
    const std::uint64_t count = (bytes + piece_bytes_ - 1) / piece_bytes_;
    const std::uint64_t ahead = std::min<std::uint64_t>(count, pieces_.size());
    auto issue = [&](std::uint64_t p) {
      const std::uint64_t off = p * piece_bytes_;
      const unsigned i = static_cast<unsigned>(p % pieces_.size());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(pieces_[i].data(), d_src + off,
                                       std::min(piece_bytes_, bytes - off),
                                       cudaMemcpyDeviceToHost, s));
      done_[i].record(s);
    };
    for (std::uint64_t p = 0; p < ahead; ++p) issue(p);
    for (std::uint64_t p = 0; p < count; ++p) {
      const unsigned i = static_cast<unsigned>(p % pieces_.size());
      done_[i].synchronize();
      const std::uint64_t off = p * piece_bytes_;
      parallel_copy(dst + off, pieces_[i].data(), std::min(piece_bytes_, bytes - off));
      if (p + ahead < count) issue(p + ahead);
    }
  }

 private:
  std::uint64_t piece_bytes_;
  std::vector<cuda::pinned_buffer> pieces_;
  std::vector<cuda::cuda_event> done_;
  std::vector<bool> in_use_;
  std::uint64_t next_{};
};

void copy_to_device(char* d_dst, const void* src, std::uint64_t bytes, cudaStream_t s,
                    staging& st)
{
  if (bytes == 0) return;
  if (is_pinned(src))
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, s));
  else
    st.copy_in(d_dst, static_cast<const char*>(src), bytes, s);
}

/// Device address of mapped pinned host memory, or null when kernels cannot read it.
const char* mapped_address(const void* host) noexcept
{
  const std::optional<cudaPointerAttributes> a = pinned_attributes(host);
  return a ? static_cast<const char*>(a->devicePointer) : nullptr;
}

/// Everything one round needs on one GPU, released only after its streams are idle.
struct round_state {
  element_layout layout;
  std::uint64_t capacity{};
  std::size_t table_entries{};
  cuda::cuda_stream h2d, compute, d2h;
  std::vector<slot> slots;
  cuda::device_buffer alt_keys, alt_values;
  cuda::device_buffer scratch;
  std::size_t scratch_bytes{};
  staging in_staging;
  staging out_staging;

  round_state(const element_layout& l, std::uint64_t elements, std::size_t tables,
              const cuda_device_options& o)
      : layout{l},
        capacity{elements},
        table_entries{std::max<std::size_t>(tables, 1)},
        in_staging{o.staging_piece_bytes, o.staging_pieces},
        out_staging{o.staging_piece_bytes, o.staging_pieces}
  {
    const std::uint64_t kb = l.key_bytes, vb = l.value_bytes;
    for (unsigned i = 0; i < cuda_device::ring_slots; ++i) {
      slot& s = slots.emplace_back();
      s.keys = cuda::device_buffer{elements * kb};
      s.values = cuda::device_buffer{elements * vb};
      const std::size_t table_bytes = table_entries * sizeof(cuda::gather_slice);
      s.key_table_host = cuda::pinned_buffer{table_bytes};
      s.value_table_host = cuda::pinned_buffer{table_bytes};
      s.key_table = cuda::device_buffer{table_bytes};
      s.value_table = cuda::device_buffer{table_bytes};
    }
    alt_keys = cuda::device_buffer{elements * kb};
    alt_values = cuda::device_buffer{elements * vb};
    scratch_bytes = cuda::radix_sort_scratch_bytes(elements, l.key_bytes, l.value_bytes);
    scratch = cuda::device_buffer{scratch_bytes};
  }

  ~round_state()
  {
    // No buffer may go while a copy or kernel still uses it.
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(h2d.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(compute.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(d2h.value()));
  }
  round_state(const round_state&) = delete;
  round_state& operator=(const round_state&) = delete;

  /// Gathers slices of mapped host memory at `base` (device address `d_base`) with one kernel
  /// launch per 65535 slices, through the slot's pinned and device tables.
  void gather_mapped(const std::vector<run>& slices, std::uint64_t first_offset,
                     const char* d_base, std::uint64_t element_bytes, char* d_out,
                     cuda::pinned_buffer& table_host, cuda::device_buffer& table)
  {
    auto* entries = table_host.data<cuda::gather_slice>();
    std::uint64_t at = first_offset, longest = 0;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      entries[i] = {d_base + slices[i].offset * element_bytes, slices[i].length, at};
      at += slices[i].length;
      longest = std::max(longest, slices[i].length);
    }
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(table.data(), entries,
                                     slices.size() * sizeof(cuda::gather_slice),
                                     cudaMemcpyHostToDevice, h2d.value()));
    for (std::size_t first = 0; first < slices.size(); first += max_slices_per_launch) {
      const auto count =
          static_cast<std::uint32_t>(std::min<std::size_t>(max_slices_per_launch,
                                                           slices.size() - first));
      cuda::gather(table.data<cuda::gather_slice>() + first, count, longest, d_out,
                   static_cast<unsigned>(element_bytes), h2d.value());
    }
  }

  /// Copy-in stage of one task.
  void load(slot& s, const chunk_task& t)
  {
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    const char* mapped_keys = t.src_ordered ? mapped_address(t.src_keys) : nullptr;
    const char* mapped_values =
        t.src_ordered && vb > 0 ? mapped_address(t.src_values) : nullptr;
    if (mapped_keys != nullptr) {
      gather_mapped(t.slices, 0, mapped_keys, kb, s.keys.data<char>(), s.key_table_host,
                    s.key_table);
    } else {
      std::uint64_t at = 0;
      for (const run& sl : t.slices) {
        copy_to_device(s.keys.data<char>() + at * kb,
                       static_cast<const char*>(t.src_keys) + sl.offset * kb, sl.length * kb,
                       h2d.value(), in_staging);
        at += sl.length;
      }
    }
    if (vb > 0) {
      const std::vector<run>& all = t.slices;
      if (mapped_values != nullptr) {
        gather_mapped(all, 0, mapped_values, vb, s.values.data<char>(), s.value_table_host,
                      s.value_table);
      } else {
        std::uint64_t at = 0;
        for (const run& sl : all) {
          copy_to_device(s.values.data<char>() + at * vb,
                         static_cast<const char*>(t.src_values) + sl.offset * vb,
                         sl.length * vb, h2d.value(), in_staging);
          at += sl.length;
        }
      }
    }
    s.loaded.record(h2d.value());
  }

  /// Compute stage: ordered bits, sort, deal or tail, raw bits again.
  void sort(slot& s, const chunk_task& t)
  {
    const cudaStream_t st = compute.value();
    s.loaded.make_wait(st);
    const unsigned kb = layout.key_bytes, vb = layout.value_bytes;
    if (!t.src_ordered) cuda::to_ordered(s.keys.data(), t.count, layout.type, layout.direction, st);
    if (cuda::radix_sort(s.keys.data(), alt_keys.data(), s.values.data(), alt_values.data(),
                         t.count, kb, vb, scratch.data(), scratch_bytes, st)) {
      std::swap(s.keys, alt_keys);
      std::swap(s.values, alt_values);
    }
    if (t.deal_bins > 1) {
      cuda::deal(s.keys.data(), vb > 0 ? s.values.data() : nullptr, t.count, t.deal_bins,
                 alt_keys.data(), vb > 0 ? alt_values.data() : nullptr, kb, vb, st);
      std::swap(s.keys, alt_keys);
      std::swap(s.values, alt_values);
    }
    if (!t.dst_ordered)
      cuda::from_ordered(s.keys.data(), t.count, layout.type, layout.direction, st);
    s.computed.record(st);
  }

  /// Copy-out stage; returns once the chunk is in host memory.
  void store(slot& s, const chunk_task& t)
  {
    const cudaStream_t st = d2h.value();
    s.computed.make_wait(st);
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    auto out = [&](void* dst, const char* d_src, std::uint64_t bytes) {
      if (bytes == 0) return;
      if (is_pinned(dst))
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, st));
      else
        out_staging.copy_out(static_cast<char*>(dst), d_src, bytes, st);
    };
    out(t.dst_keys, s.keys.data<char>(), t.count * kb);
    if (vb > 0) out(t.dst_values, s.values.data<char>(), t.count * vb);
    write_equal_tail(t, layout);  // overlaps the copies above
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
  }
};

/// Collects the first failure of the stage threads and stops the others.
class failure_latch {
 public:
  explicit failure_latch(job_context& ctx) : ctx_{ctx} {}
  template <typename F>
  void run(F&& body, std::initializer_list<std::function<void()>> on_failure)
  {
    try {
      body();
    } catch (...) {
      {
        const std::lock_guard lock{mutex_};
        if (!first_) first_ = std::current_exception();
      }
      ctx_.abort();
      for (const auto& f : on_failure) f();
    }
  }
  void rethrow() const
  {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  job_context& ctx_;
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace

cuda_device::cuda_device(cuda_device_options options) : options_{std::move(options)}
{
  const cuda::set_device_guard guard{options_.id};
  cudaDeviceProp prop{};
  GPUSORT_CUDA_TRY(cudaGetDeviceProperties(&prop, options_.id));
  name_ = "cuda:" + std::to_string(options_.id) + " (" + prop.name + ")";
  if (options_.budget) {
    budget_bytes_ = *options_.budget;
  } else {
    std::size_t free_bytes = 0, total = 0;
    GPUSORT_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
    budget_bytes_ = free_bytes > options_.reserve_bytes ? free_bytes - options_.reserve_bytes : 0;
  }
}

cuda_device::~cuda_device() = default;

std::string cuda_device::name() const { return name_; }

void cuda_device::shrink_budget() noexcept
{
  // A quarter less, and no more than what is free now: a budget above the GPU's memory comes
  // down to it on the first retry.
  budget_bytes_ -= budget_bytes_ / 4;
  const cuda::set_device_guard guard{options_.id};
  std::size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
    const std::uint64_t usable =
        free_bytes > options_.reserve_bytes ? free_bytes - options_.reserve_bytes : 0;
    budget_bytes_ = std::min<std::uint64_t>(budget_bytes_, usable);
  } else {
    cudaGetLastError();
  }
}

device_capacity cuda_device::capacity(const element_layout& layout) const
{
  // Besides the chunk buffers the budget holds the sort's scratch (which grows with the chunk)
  // and a margin for gather tables, staging and what CUB and the runtime take: the largest
  // capacity C with margin + scratch(C) + C * per_element <= budget, by bisection.
  constexpr std::uint64_t margin = std::uint64_t{64} << 20;
  const std::uint64_t per_element = buffers_per_element * layout.bytes();
  const cuda::set_device_guard guard{options_.id};
  auto need = [&](std::uint64_t c) {
    return margin + per_element * c +
           cuda::radix_sort_scratch_bytes(c, layout.key_bytes, layout.value_bytes);
  };
  std::uint64_t lo = 0, hi = budget_bytes_ / per_element + 1;
  while (lo + 1 < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (need(mid) <= budget_bytes_ ? lo : hi) = mid;
  }
  const std::uint64_t elements = std::max<std::uint64_t>(lo, 1);
  return device_capacity{.elements = elements,
                         .bytes_per_element = per_element,
                         .fixed_bytes = need(elements) - per_element * elements};
}

void cuda_device::process(const element_layout& layout, task_queue& queue, job_context& ctx)
{
  const cuda::set_device_guard guard{options_.id};
  const std::uint64_t elements = std::max<std::uint64_t>(queue.largest(), 1);
  GPUSORT_EXPECTS(elements <= capacity(layout).elements, "a task exceeds the GPU's capacity");
  round_state state{layout, elements, queue.most_slices(), options_};

  stage_queue<slot*> free_slots, loaded, computed;
  for (slot& s : state.slots) free_slots.push(&s);
  failure_latch latch{ctx};
  const int device_id = options_.id;
  auto close_all = [&] {
    free_slots.close();
    loaded.close();
    computed.close();
  };

  std::jthread loader{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const chunk_task* t = queue.pop()) {
            ctx.check();
            const auto s = free_slots.pop();
            if (!s) break;
            (*s)->task = t;
            state.load(**s, *t);
            loaded.push(*s);
          }
        },
        {close_all});
    loaded.close();
  }};
  std::jthread sorter{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = loaded.pop()) {
            state.sort(**s, *(*s)->task);
            computed.push(*s);
          }
        },
        {close_all});
    computed.close();
  }};
  std::jthread storer{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = computed.pop()) {
            state.store(**s, *(*s)->task);
            ctx.add_done((*s)->task->total());
            free_slots.push(*s);
          }
        },
        {close_all});
  }};
  loader.join();
  sorter.join();
  storer.join();
  latch.rethrow();
}

host_buffer pinned_host_buffer(std::size_t bytes)
{
  host_buffer b{bytes};
  if (bytes == 0) return b;
  GPUSORT_CUDA_TRY(
      cudaHostRegister(b.data(), bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
  b.set_release_hook(
      [](void* p, std::size_t) { GPUSORT_CUDA_ASSERT_OK(cudaHostUnregister(p)); });
  return b;
}

bool is_pinned(const void* p) noexcept { return pinned_attributes(p).has_value(); }

}  // namespace gpusort::detail
