// The sanitizer builds' own checks (tests/sanitizer/CMakeLists.txt): each mode does one thing a
// sanitizer must see, or one thing it must not report, so that a preset whose flags, runtime or
// OpenMP annotations silently stop working fails here instead of passing every other test.
//   sanitizer_canary omp_synchronized  OpenMP threads that hand data over only through OpenMP's
//                                      barriers, region ends, reductions and locks: clean
//   sanitizer_canary omp_race          two OpenMP threads write one variable unordered: a race
//   sanitizer_canary heap_overflow     a read one past a heap array: an ASan report
//   sanitizer_canary signed_overflow   INT_MAX + 1: a UBSan report that stops the program
#include <omp.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

namespace {

// Volatile reads keep the compiler from folding the undefined operations away.
volatile int sink = 0;

int omp_synchronized()
{
  constexpr int per_thread = 1024;
  const int threads = 4;
  std::vector<int> data(static_cast<std::size_t>(threads * per_thread), 0);
  long long sum = 0;
  long long locked = 0;
  omp_lock_t lock;
  omp_init_lock(&lock);
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    const int team = omp_get_num_threads();
    for (int i = 0; i < per_thread; ++i) data[static_cast<std::size_t>(me * per_thread + i)] = me;
    // Each thread reads the block its neighbour wrote before the barrier.
#pragma omp barrier
    const int next = (me + 1) % team;
    long long mine = 0;
    for (int i = 0; i < per_thread; ++i) mine += data[static_cast<std::size_t>(next * per_thread + i)];
    omp_set_lock(&lock);
    locked += mine;
    omp_unset_lock(&lock);
  }
  // After the region (its implicit barrier and join) the master reads what every thread wrote,
  // and a second team reads the first team's writes.
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static, 7)
  for (int i = 0; i < threads * per_thread; ++i) sum += data[static_cast<std::size_t>(i)];
  omp_destroy_lock(&lock);
  std::printf("sum %lld, locked %lld\n", sum, locked);
  return sum == locked ? 0 : 1;
}

int omp_race()
{
  int shared = 0;
#pragma omp parallel num_threads(2)
  {
    shared += omp_get_thread_num() + 1;  // both threads, no ordering: the race TSan must see
  }
  std::printf("shared %d\n", shared);
  return 0;
}

int heap_overflow()
{
  const auto data = std::make_unique<int[]>(8);
  return data[8 + sink];
}

int signed_overflow()
{
  int x = INT_MAX - sink;
  x += 1;
  std::printf("%d\n", x);
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "omp_synchronized") return omp_synchronized();
  if (mode == "omp_race") return omp_race();
  if (mode == "heap_overflow") return heap_overflow();
  if (mode == "signed_overflow") return signed_overflow();
  std::fprintf(stderr, "usage: sanitizer_canary omp_synchronized|omp_race|heap_overflow|"
                       "signed_overflow\n");
  return 64;
}
