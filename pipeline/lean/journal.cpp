#include "pipeline/lean/journal.hpp"

#include "core/checks.hpp"
#include "core/switches.hpp"
#include "core/sys_io.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

namespace gpusort::detail::lean {

namespace {

constexpr char magic[8] = {'G', 'P', 'U', 'S', 'O', 'R', 'T', 'J'};
constexpr std::uint32_t format_version = 2;
/// The room starts on a huge page of the journal file, so that tmpfs can back it with them.
constexpr std::uint64_t room_alignment = std::uint64_t{2} << 20;

/// The journal's first bytes; the arrays follow at the offsets it names.
struct header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t phase;  ///< enum phase, stored with release
  std::uint64_t n, room, key_bytes, value_bytes, chunk, chunks;
  std::uint64_t plan_blocks, block, blocks, movers, most_buckets, buckets;
  std::uint64_t storage_begin, storage_used;
  file_identity keys, values;
  std::uint64_t has_values;
  std::uint64_t r1_offset, cls_offset, slots_offset, table_offset, r2_offset;
  std::uint64_t meta_bytes, room_keys_offset, room_values_offset, total_bytes;
  // The gathering round 2: round 1's blocks (of `block` elements) and where each lies, and
  // every bucket's pieces with the index of each bucket's first.
  std::uint64_t gather_blocks, most_pieces, pieces;
  std::uint64_t where_offset, pieces_offset, first_offset;
};
static_assert(sizeof(header) <= 1024);

constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept
{
  return (v + a - 1) / a * a;
}

/// The header of a new journal for `p`, its offsets laid out.
header layout_for(const plan& p, std::uint32_t key_bytes, std::uint32_t value_bytes)
{
  header h{};
  std::memcpy(h.magic, magic, sizeof magic);
  h.version = format_version;
  h.phase = static_cast<std::uint32_t>(phase::none);
  h.n = p.n;
  h.room = p.room;
  h.key_bytes = key_bytes;
  h.value_bytes = value_bytes;
  h.chunk = p.chunk;
  h.chunks = p.chunks;
  h.plan_blocks = p.blocks();
  h.block = p.block;
  h.blocks = p.blocks();
  h.movers = 64;
  h.most_buckets = p.most_buckets();
  h.r1_offset = 1024;
  h.cls_offset = align_up(h.r1_offset + h.chunks, 64);
  h.slots_offset = align_up(h.cls_offset + (h.plan_blocks + 63) / 64 * 8, 64);
  h.table_offset = align_up(h.slots_offset + h.movers * sizeof(move_slot), 64);
  h.r2_offset = h.table_offset + h.most_buckets * sizeof(bucket_place);
  // Each bucket holds a piece of each chunk, and cutting the equal keys to bucket_limit adds
  // one piece per bucket made; a permuting job keeps no such tables.
  h.gather_blocks = p.gather ? (p.n + p.block - 1) / p.block : 0;
  h.most_pieces = p.gather ? (p.chunks + 1) * h.most_buckets : 0;
  h.where_offset = align_up(h.r2_offset + h.most_buckets, 64);
  h.pieces_offset = h.where_offset + h.gather_blocks * sizeof(std::uint64_t);
  h.first_offset = h.pieces_offset + h.most_pieces * sizeof(run);
  h.meta_bytes = align_up(h.first_offset + (h.most_buckets + 1) * sizeof(std::uint64_t), 4096);
  h.room_keys_offset = align_up(h.meta_bytes, room_alignment);
  h.room_values_offset = align_up(h.room_keys_offset + p.room * key_bytes, room_alignment);
  h.total_bytes = h.room_values_offset + p.room * value_bytes;
  return h;
}

template <typename T>
std::atomic_ref<T> atomic(T& v) noexcept
{
  return std::atomic_ref<T>{v};
}

/// GPUSORT_LEAN_CRASH_AT=N: the process kills itself (SIGKILL, as kill -9 would) at the N-th
/// step any journal of it records, so that tests reach every kind of step of the lean path
/// (tests/client/lean_cli_test.cpp); unset, one relaxed load per step.
void crash_point() noexcept
{
  static const std::uint64_t at =
      detail::switch_count("GPUSORT_LEAN_CRASH_AT", 1, std::uint64_t{1} << 40).value_or(0);
  static std::atomic<std::uint64_t> steps{0};
  if (at != 0 && steps.fetch_add(1, std::memory_order_relaxed) + 1 == at) ::raise(SIGKILL);
}

[[noreturn]] void fail_io(const std::string& what, const std::string& name)
{
  throw io_error{what + " " + name + ": " + std::strerror(errno)};
}

}  // namespace

struct journal::state {
  std::string name;
  // Memory journals own these; file journals map the metadata and window the room.
  host_buffer meta_memory, room_keys_memory, room_values_memory;
  int fd{-1};
  char* mapped{};
  std::uint64_t mapped_bytes{};
  std::optional<file_array> room_keys_window, room_values_window;
  char* room_keys{};    ///< a memory journal's room: its own buffers, or the caller's
  char* room_values{};
  header* h{};

  ~state()
  {
    if (mapped != nullptr) ::munmap(mapped, mapped_bytes);
  }
  [[nodiscard]] char* meta() const noexcept { return reinterpret_cast<char*>(h); }
  template <typename T>
  [[nodiscard]] T* at(std::uint64_t offset) const noexcept
  {
    return reinterpret_cast<T*>(meta() + offset);
  }
  void map(std::uint64_t bytes)
  {
    void* m = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) fail_io("cannot map the journal", name);
    mapped = static_cast<char*>(m);
    mapped_bytes = bytes;
    h = reinterpret_cast<header*>(mapped);
  }
  void window_room()
  {
    if (h->room * h->key_bytes > 0)
      room_keys_window.emplace(fd, h->room_keys_offset, h->room * h->key_bytes, name);
    if (h->room * h->value_bytes > 0)
      room_values_window.emplace(fd, h->room_values_offset, h->room * h->value_bytes, name);
  }
};

journal::journal(std::unique_ptr<state> s) : state_{std::move(s)} {}

journal::journal(const plan& p, std::uint32_t key_bytes, std::uint32_t value_bytes,
                 host_buffer* room)
    : state_{std::make_unique<state>()}
{
  const header layout = layout_for(p, key_bytes, value_bytes);
  state_->name = "the lean sort's journal";
  state_->meta_memory = host_buffer{layout.meta_bytes};
  std::memset(state_->meta_memory.data(), 0, layout.meta_bytes);
  state_->h = state_->meta_memory.as<header>();
  *state_->h = layout;
  if (room != nullptr && room->size() >= room_bytes(p, key_bytes, value_bytes)) {
    state_->room_keys = room->as<char>();
    state_->room_values = room->as<char>() + room_values_offset(p, key_bytes);
    return;
  }
  state_->room_keys_memory = host_buffer{p.room * key_bytes};
  state_->room_values_memory = host_buffer{p.room * value_bytes};
  state_->room_keys = state_->room_keys_memory.as<char>();
  state_->room_values = state_->room_values_memory.as<char>();
}

journal::journal(int fd, std::string name, const plan& p, std::uint32_t key_bytes,
                 std::uint32_t value_bytes, file_identity keys, file_identity values)
    : state_{std::make_unique<state>()}
{
  header layout = layout_for(p, key_bytes, value_bytes);
  layout.keys = keys;
  layout.values = values;
  layout.has_values = value_bytes > 0 ? 1 : 0;
  state_->name = std::move(name);
  state_->fd = fd;
  if (::ftruncate(fd, 0) != 0 || ::ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0)
    fail_io("cannot size the journal", state_->name);
  // Every page now: a room that runs out of space in round 2 would fail the job there.
  if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(layout.total_bytes)); e != 0) {
    errno = e;
    fail_io("cannot make room for the journal", state_->name);
  }
  state_->map(layout.meta_bytes);
  // The magic last: a journal killed while its header was written reads as one that never
  // started (untouched), not as a damaged one.
  header without_magic = layout;
  std::memset(without_magic.magic, 0, sizeof without_magic.magic);
  *state_->h = without_magic;
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(state_->h->magic, magic, sizeof magic);
  std::atomic_thread_fence(std::memory_order_release);
  state_->window_room();
}

bool journal::untouched(int fd)
{
  std::array<char, sizeof(header)> head{};
  const ssize_t got = sys::pread(fd, head.data(), head.size(), 0);
  if (got < 0) fail_io("cannot read the journal", "");
  // Made (a name only this engine's callers give), but killed before its header was whole:
  // the magic goes in last, and no element moves before it is there.
  return got < static_cast<ssize_t>(sizeof magic) ||
         std::memcmp(head.data(), magic, sizeof magic) != 0;
}

journal journal::open(int fd, std::string name)
{
  auto s = std::make_unique<state>();
  s->name = std::move(name);
  s->fd = fd;
  struct stat st{};
  if (sys::fstat(fd, &st) != 0) fail_io("cannot stat the journal", s->name);
  header h{};
  const ssize_t got = sys::pread(fd, &h, sizeof h, 0);
  if (got < 0) fail_io("cannot read the journal", s->name);
  if (static_cast<std::size_t>(got) < sizeof h || std::memcmp(h.magic, magic, sizeof magic) != 0)
    throw io_error{s->name + " is not a gpusort journal"};
  if (h.version != format_version)
    throw io_error{s->name + " is a journal of another gpusort version (format " +
                   std::to_string(h.version) + ")"};
  if (static_cast<std::uint64_t>(st.st_size) < h.total_bytes || h.meta_bytes > h.total_bytes ||
      h.r2_offset + h.most_buckets > h.meta_bytes || h.blocks > h.plan_blocks ||
      h.first_offset + (h.most_buckets + 1) * sizeof(std::uint64_t) > h.meta_bytes ||
      h.pieces > h.most_pieces || h.block == 0 ||
      h.buckets > h.most_buckets || h.key_bytes == 0)
    throw io_error{s->name + " is damaged (its sizes do not agree)"};
  s->map(h.meta_bytes);
  s->window_room();
  return journal{std::move(s)};
}

journal::~journal() = default;
journal::journal(journal&&) noexcept = default;
journal& journal::operator=(journal&&) noexcept = default;

char* journal::room_keys() const noexcept
{
  if (state_->room_keys_window) return static_cast<char*>(state_->room_keys_window->data());
  return state_->room_keys;
}

char* journal::room_values() const noexcept
{
  if (state_->room_values_window) return static_cast<char*>(state_->room_values_window->data());
  return state_->room_values;
}

bool journal::in_file() const noexcept { return state_->fd >= 0; }

phase journal::current() const noexcept
{
  return static_cast<phase>(atomic(state_->h->phase).load(std::memory_order_acquire));
}

void journal::set_phase(phase p) noexcept
{
  crash_point();
  atomic(state_->h->phase).store(static_cast<std::uint32_t>(p), std::memory_order_release);
}

std::uint64_t journal::n() const noexcept { return state_->h->n; }
std::uint64_t journal::room() const noexcept { return state_->h->room; }
std::uint32_t journal::key_bytes() const noexcept
{
  return static_cast<std::uint32_t>(state_->h->key_bytes);
}
std::uint32_t journal::value_bytes() const noexcept
{
  return static_cast<std::uint32_t>(state_->h->value_bytes);
}
file_identity journal::keys_file() const noexcept { return state_->h->keys; }
file_identity journal::values_file() const noexcept { return state_->h->values; }
bool journal::has_values_file() const noexcept { return state_->h->has_values != 0; }

void journal::chunk_written(std::uint64_t j) noexcept
{
  crash_point();
  atomic(state_->at<std::uint8_t>(state_->h->r1_offset)[j]).store(1, std::memory_order_release);
}

void journal::set_blocks(std::uint64_t block, std::uint64_t blocks) noexcept
{
  state_->h->block = block;
  atomic(state_->h->blocks).store(blocks, std::memory_order_release);
}
std::uint64_t journal::block() const noexcept { return state_->h->block; }
std::uint64_t journal::blocks() const noexcept { return state_->h->blocks; }

bool journal::block_live(std::uint64_t p) const noexcept
{
  const std::uint64_t word =
      atomic(state_->at<std::uint64_t>(state_->h->cls_offset)[p / 64]).load(
          std::memory_order_acquire);
  return ((word >> (p % 64)) & 1) != 0;
}

void journal::set_block_live(std::uint64_t p, bool live) noexcept
{
  crash_point();
  auto word = atomic(state_->at<std::uint64_t>(state_->h->cls_offset)[p / 64]);
  const std::uint64_t bit = std::uint64_t{1} << (p % 64);
  if (live)
    word.fetch_or(bit, std::memory_order_acq_rel);
  else
    word.fetch_and(~bit, std::memory_order_acq_rel);
}

void journal::set_storage(std::uint64_t begin, std::uint64_t used) noexcept
{
  crash_point();
  state_->h->storage_begin = begin;
  atomic(state_->h->storage_used).store(used, std::memory_order_release);
}

std::uint64_t journal::movers() const noexcept { return state_->h->movers; }

move_slot journal::slot(std::uint64_t i) const noexcept
{
  move_slot& s = state_->at<move_slot>(state_->h->slots_offset)[i];
  move_slot copy;
  copy.state = atomic(s.state).load(std::memory_order_acquire);
  copy.from = s.from;
  copy.to = s.to;
  return copy;
}

void journal::set_slot(std::uint64_t i, move_slot v) noexcept
{
  crash_point();
  move_slot& s = state_->at<move_slot>(state_->h->slots_offset)[i];
  if (v.state == 1) {  // a new move: its blocks first, then the state that makes them count
    s.from = v.from;
    s.to = v.to;
  }
  atomic(s.state).store(v.state, std::memory_order_release);
}

void journal::set_buckets(const std::vector<bucket_place>& buckets)
{
  GPUSORT_EXPECTS(buckets.size() <= state_->h->most_buckets, "more buckets than planned");
  std::copy(buckets.begin(), buckets.end(), state_->at<bucket_place>(state_->h->table_offset));
  atomic(state_->h->buckets).store(buckets.size(), std::memory_order_release);
}

std::uint64_t journal::buckets() const noexcept { return state_->h->buckets; }

bucket_place journal::bucket(std::uint64_t k) const noexcept
{
  return state_->at<bucket_place>(state_->h->table_offset)[k];
}

void journal::bucket_written(std::uint64_t k) noexcept
{
  crash_point();
  atomic(state_->at<std::uint8_t>(state_->h->r2_offset)[k]).store(1, std::memory_order_release);
}

void journal::set_pieces(const std::vector<run>& pieces, const std::vector<std::uint64_t>& first)
{
  header& h = *state_->h;
  GPUSORT_EXPECTS(pieces.size() <= h.most_pieces && first.size() == h.buckets + 1 &&
                      first.back() == pieces.size(),
                  "more pieces than planned");
  std::copy(pieces.begin(), pieces.end(), state_->at<run>(h.pieces_offset));
  std::copy(first.begin(), first.end(), state_->at<std::uint64_t>(h.first_offset));
  atomic(h.pieces).store(pieces.size(), std::memory_order_release);
}

void journal::start_gathering() noexcept
{
  auto* where = state_->at<std::uint64_t>(state_->h->where_offset);
  for (std::uint64_t o = 0; o < state_->h->gather_blocks; ++o) where[o] = o;
  std::atomic_thread_fence(std::memory_order_release);
  set_phase(phase::gathering);
}

std::uint64_t journal::where(std::uint64_t o) const noexcept
{
  return atomic(state_->at<std::uint64_t>(state_->h->where_offset)[o])
      .load(std::memory_order_acquire);
}

void journal::set_where(std::uint64_t o, std::uint64_t q) noexcept
{
  crash_point();
  atomic(state_->at<std::uint64_t>(state_->h->where_offset)[o])
      .store(q, std::memory_order_release);
}

std::vector<run> journal::live_ranges() const
{
  const header& h = *state_->h;
  const std::uint64_t n = h.n;
  const std::uint64_t room = h.room;
  std::vector<run> live;
  const auto add = [&](std::uint64_t x, std::uint64_t len) {
    if (len > 0) live.push_back(run{x, len});
  };
  switch (current()) {
    case phase::none:
    case phase::finished:
    case phase::restored:
      add(room, n);
      break;
    case phase::round1: {
      const auto* done = state_->at<const std::uint8_t>(h.r1_offset);
      for (std::uint64_t j = 0; j < h.chunks; ++j) {
        const std::uint64_t begin = j * h.chunk;
        const std::uint64_t len = j + 1 < h.chunks ? h.chunk : n - begin;
        add(atomic(const_cast<std::uint8_t&>(done[j])).load() != 0 ? begin : room + begin, len);
      }
      break;
    }
    case phase::evacuating:
      add(0, n);
      break;
    case phase::permuting:
    case phase::cleaning: {
      std::vector<bool> full(h.blocks);
      for (std::uint64_t p = 0; p < h.blocks; ++p) full[p] = block_live(p);
      // A move whose copy completed counts: finish its map update here (idempotently).
      for (std::uint64_t i = 0; i < h.movers; ++i) {
        const move_slot s = slot(i);
        if (s.state == 2 && s.from < h.blocks && s.to < h.blocks && full[s.from]) {
          full[s.to] = true;
          full[s.from] = false;
        }
      }
      for (std::uint64_t p = 0; p < h.blocks; ++p)
        if (full[p]) add(p * h.block, h.block);
      add(h.storage_begin, atomic(const_cast<std::uint64_t&>(h.storage_used)).load());
      break;
    }
    case phase::gathering: {
      // A written bucket is in its place; the others' pieces lie in round 1's blocks, wherever
      // those are now.
      const auto* done = state_->at<const std::uint8_t>(h.r2_offset);
      const auto* pieces = state_->at<const run>(h.pieces_offset);
      const auto* first = state_->at<const std::uint64_t>(h.first_offset);
      const std::uint64_t blocks_total = (n + room + h.block - 1) / h.block;
      for (std::uint64_t k = 0; k < h.buckets; ++k) {
        const bucket_place b = bucket(k);
        if (atomic(const_cast<std::uint8_t&>(done[k])).load() != 0) {
          add(room + b.out, b.size);
          continue;
        }
        if (first[k] > first[k + 1] || first[k + 1] > h.pieces)
          throw io_error{state_->name + " is damaged (its piece table)"};
        for (std::uint64_t i = first[k]; i < first[k + 1]; ++i)
          for_each_block_run(pieces[i], h.block, [&](std::uint64_t o, std::uint64_t from,
                                                      std::uint64_t len) {
            const std::uint64_t q = o < h.gather_blocks ? where(o) : blocks_total;
            if (q >= blocks_total) throw io_error{state_->name + " is damaged (a block's place)"};
            add(q * h.block + from, len);
          });
      }
      break;
    }
    case phase::round2: {
      const auto* done = state_->at<const std::uint8_t>(h.r2_offset);
      for (std::uint64_t k = 0; k < h.buckets; ++k) {
        const bucket_place b = bucket(k);
        const bool written = atomic(const_cast<std::uint8_t&>(done[k])).load() != 0;
        add(written ? room + b.out : b.source, b.size);
      }
      break;
    }
  }
  std::sort(live.begin(), live.end(),
            [](const run& a, const run& b) { return a.offset < b.offset; });
  std::uint64_t total = 0;
  std::vector<run> merged;
  for (const run& r : live) {
    if (!merged.empty() && r.offset < merged.back().offset + merged.back().length)
      throw io_error{state_->name + " is damaged (two live ranges overlap)"};
    if (!merged.empty() && r.offset == merged.back().offset + merged.back().length)
      merged.back().length += r.length;
    else
      merged.push_back(r);
    total += r.length;
  }
  if (total != n || (!merged.empty() && merged.back().offset + merged.back().length > n + room))
    throw io_error{state_->name + " is damaged (its live elements are not the array's)"};
  return merged;
}

void restore(journal& j, const space& s)
{
  const phase at = j.current();
  if (at == phase::finished || at == phase::restored) return;
  const std::vector<run> live = j.live_ranges();
  // The room's live ranges, and the array's free ones: as long together.
  std::vector<run> from;
  std::vector<run> to;
  std::uint64_t array_at = s.room;
  for (const run& r : live) {
    if (r.offset < s.room) {
      const std::uint64_t end = std::min(r.offset + r.length, s.room);
      from.push_back(run{r.offset, end - r.offset});
    }
    const std::uint64_t begin = std::max(r.offset, s.room);
    const std::uint64_t end = r.offset + r.length;
    if (begin >= end) continue;
    if (begin > array_at) to.push_back(run{array_at, begin - array_at});
    array_at = end;
  }
  if (array_at < s.room + s.n) to.push_back(run{array_at, s.room + s.n - array_at});
  // Pieces of at most 64 MiB of keys, copied from every core.
  struct copy {
    std::uint64_t to, from, length;
  };
  std::vector<copy> copies;
  const std::uint64_t piece = std::max<std::uint64_t>((std::uint64_t{64} << 20) / s.key_bytes, 1);
  std::size_t ti = 0;
  std::uint64_t t_used = 0;
  for (const run& f : from) {
    std::uint64_t done = 0;
    while (done < f.length) {
      GPUSORT_EXPECTS(ti < to.size(), "the room's live elements exceed the array's gaps");
      const std::uint64_t len =
          std::min({f.length - done, to[ti].length - t_used, piece});
      copies.push_back(copy{to[ti].offset + t_used, f.offset + done, len});
      done += len;
      t_used += len;
      if (t_used == to[ti].length) {
        ++ti;
        t_used = 0;
      }
    }
  }
  std::exception_ptr failure;
#pragma omp parallel
  {
    bounce_buffer bounce;
#pragma omp for schedule(dynamic)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(copies.size()); ++i) {
      try {
        const copy& c = copies[static_cast<std::size_t>(i)];
        copy_elements(s, c.to, c.from, c.length, bounce);
      } catch (...) {
#pragma omp critical(lean_restore_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
  j.set_phase(phase::restored);
}

}  // namespace gpusort::detail::lean
