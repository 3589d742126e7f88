// gpusort::engine: picks the devices from the configuration, plans each job and runs it.
#include "core/plan/chunk_plan.hpp"
#include "pipeline/device.hpp"
#include "pipeline/direct.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/gpu_probe.hpp"
#include "pipeline/host_device.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

namespace gpusort {

namespace {

std::vector<std::unique_ptr<detail::device>> make_devices(const config& cfg)
{
  std::vector<std::unique_ptr<detail::device>> devices;
  switch (cfg.devices) {
    case device_selection::cpu: break;
    case device_selection::automatic: {
      const detail::gpu_probe_result probe = detail::probe_gpus();
      if (probe.gpus.empty()) {
        spdlog::info("devices: auto: no GPU ({}); sorting on the CPU", probe.note);
      } else {
        spdlog::warn("devices: auto: found {} GPU(s) but this build has no GPU executor yet; "
                     "sorting on the CPU",
                     probe.gpus.size());
      }
      break;
    }
    case device_selection::listed:
      throw config_error{"devices: GPUs are listed, but this build has no GPU executor; use "
                         "'devices: cpu' or 'devices: auto'"};
  }
  devices.push_back(
      std::make_unique<detail::host_device>(cfg.device_memory_budget, cfg.host_threads));
  return devices;
}

void validate(const sort_job& job)
{
  if (job.keys.count > 0 && job.keys.data == nullptr)
    throw invalid_argument{"sort: keys are null"};
  if (job.values) {
    if (job.values->value_bytes != 4 && job.values->value_bytes != 8)
      throw invalid_argument{"sort: values must be 4 or 8 bytes, not " +
                             std::to_string(job.values->value_bytes)};
    if (job.values->count != job.keys.count)
      throw invalid_argument{"sort: " + std::to_string(job.values->count) + " values for " +
                             std::to_string(job.keys.count) + " keys"};
    if (job.values->count > 0 && job.values->data == nullptr)
      throw invalid_argument{"sort: values are null"};
  }
  const bool separate = job.keys_out != nullptr;
  if (job.values && job.keys.count > 0 && separate != (job.values_out != nullptr))
    throw invalid_argument{"sort: keys and values must both be sorted in place or both into "
                           "separate outputs"};
  if (!job.values && job.values_out != nullptr)
    throw invalid_argument{"sort: a values output without values"};
}

}  // namespace

struct engine::impl {
  config cfg;
  std::vector<std::unique_ptr<detail::device>> devices;
};

engine::engine(config cfg) : impl_{std::make_unique<impl>()}
{
  impl_->devices = make_devices(cfg);
  impl_->cfg = std::move(cfg);
}

engine::~engine() = default;
engine::engine(engine&&) noexcept = default;
engine& engine::operator=(engine&&) noexcept = default;

const config& engine::configuration() const noexcept { return impl_->cfg; }

std::vector<std::string> engine::devices() const
{
  std::vector<std::string> names;
  for (const auto& dev : impl_->devices) names.push_back(dev->name());
  return names;
}

sort_report engine::sort(const sort_job& job, const sort_options& options)
{
  validate(job);
  const auto start = std::chrono::steady_clock::now();
  const detail::element_layout layout{
      .type = job.keys.type,
      .direction = options.direction,
      .key_bytes = static_cast<std::uint32_t>(size_of(job.keys.type)),
      .value_bytes = job.values ? job.values->value_bytes : 0U};
  detail::job_arrays arrays{.src_keys = job.keys.data,
                            .src_values = job.values ? job.values->data : nullptr,
                            .dst_keys = job.keys_out ? job.keys_out : job.keys.data,
                            .dst_values = job.keys_out ? job.values_out
                                                       : (job.values ? job.values->data : nullptr),
                            .n = job.keys.count};
  if (arrays.dst_keys == arrays.src_keys) arrays.dst_values = arrays.src_values;

  std::vector<detail::device*> devs;
  for (const auto& dev : impl_->devices) devs.push_back(dev.get());
  detail::job_context ctx{options, layout.bytes()};

  sort_report report;
  detail::execution_stats stats;
  const config& cfg = impl_->cfg;
  if (!cfg.device_memory_budget && !cfg.chunk_bytes) {
    report.engine = "cpu-direct";
    stats = detail::sort_direct(arrays, layout, cfg.host_threads, ctx);
  } else {
    report.engine = "cpu-dsps";
    const detail::device_capacity cap = detail::common_capacity(devs, layout);
    std::optional<std::uint64_t> max_chunk;
    if (cfg.chunk_bytes) max_chunk = std::max<std::uint64_t>(1, *cfg.chunk_bytes / layout.bytes());
    const detail::chunk_plan plan = detail::make_plan(arrays.n, cap, max_chunk);
    stats = detail::execute(arrays, layout, plan, devs, ctx);
  }
  report.elements = arrays.n;
  report.bytes = arrays.n * layout.bytes();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.devices = devices();
  report.chunks = stats.chunks;
  report.rounds = stats.rounds;
  report.compensated_chunks = stats.compensated_chunks;
  return report;
}

}  // namespace gpusort
