// gpusortd: the sort daemon. Programs hand it arrays in shared memory or files (as descriptors)
// over a Unix socket; it sorts them with the engine (GPUs, or the CPU) and answers when done.
//
//   gpusortd --config FILE [--check-config | --print-config]
//
// Exit codes: 0 after a clean shutdown, 64 usage, 70 runtime failure (socket in use, engine),
// 78 configuration error.
#include "core/program_log.hpp"
#include "pipeline/gpu_probe.hpp"
#include "service/buffer_pool.hpp"
#include "service/daemon_context.hpp"
#include "service/job_queue.hpp"
#include "service/reload.hpp"
#include "service/sd_notify.hpp"
#include "service/server.hpp"
#include "service/system_info.hpp"

#include <gpusort/config.hpp>
#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <boost/asio/io_context.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace {

using namespace gpusort;

constexpr int exit_ok = 0;
constexpr int exit_usage = 64;
constexpr int exit_runtime = 70;
constexpr int exit_config = 78;

constexpr const char* usage =
    "usage: gpusortd --config FILE [--check-config | --print-config]\n"
    "\n"
    "The gpusort daemon: sorts arrays that local programs pass over a Unix socket.\n"
    "\n"
    "  --config FILE   the configuration (YAML; deploy/gpusort.yaml documents every key)\n"
    "  --check-config  check the configuration as starting would (the file, the GPUs it\n"
    "                  names on this host, the socket's path), say so in one line, and exit\n"
    "  --print-config  the same, then print the configuration with every key\n"
    "  --help          show this text\n"
    "  --version       show the version\n"
    "\n"
    "SIGTERM or SIGINT: stop accepting, finish or cancel the jobs (keys shutdown and\n"
    "shutdown_timeout), remove the socket and exit 0; a second signal cancels the jobs.\n"
    "SIGHUP: read FILE again and apply log_level, allowed_uids, allowed_gids,\n"
    "max_connections, max_queued_jobs, admission, host_memory_budget, shutdown and\n"
    "shutdown_timeout; other changed keys are logged and wait for a restart. A file that\n"
    "does not load is logged and the daemon keeps its configuration.\n"
    "With $NOTIFY_SOCKET set (systemd Type=notify) it reports READY=1 once the engine is\n"
    "initialised and the socket bound, and STOPPING=1 when it begins to stop.\n"
    "exit codes: 0 ok, 64 usage, 70 runtime error, 78 configuration error\n";

/// Page-locks the pool's buffers with every GPU of the engine, once per buffer: the one place
/// where the daemon pins. On a CPU engine the registrations are empty.
class host_pinning {
 public:
  explicit host_pinning(engine& eng) : eng_{eng} {}
  service::pin_hooks hooks()
  {
    return service::pin_hooks{
        .pin = [this](void* p, std::size_t n) {
          host_registration r = eng_.register_host(p, n);
          const std::lock_guard lock{mutex_};
          registrations_.emplace(p, std::move(r));
        },
        .unpin = [this](void* p, std::size_t) {
          const std::lock_guard lock{mutex_};
          registrations_.erase(p);
        }};
  }

 private:
  engine& eng_;
  std::mutex mutex_;
  std::map<void*, host_registration> registrations_;
};

/// What starting refuses beyond the file, found without starting (issue 43: a check that passed
/// `devices: [0]` on a host without that GPU, which start then refused): the GPUs the
/// configuration lists must be on this host (the probe the engine asks when it starts; a GPU
/// in exclusive-process mode that the running daemon holds fails it, as a second daemon
/// would), and nothing but a socket may be at the socket's path. A daemon answering on the
/// socket is no error here, and neither is a missing folder (systemd's RuntimeDirectory makes
/// it before the daemon starts): the check runs before a start and before a reload. Throws
/// config_error.
void check_startable(const config& cfg)
{
  if (cfg.devices == device_selection::listed) {
    const detail::gpu_probe_result probe = detail::probe_gpus();
    for (const int id : cfg.gpu_ids)
      if (std::none_of(probe.gpus.begin(), probe.gpus.end(),
                       [&](const detail::gpu_info& g) { return g.id == id; }))
        throw config_error{"devices: GPU " + std::to_string(id) + " is not on this host (" +
                           std::to_string(probe.gpus.size()) + " GPU(s) found" +
                           (probe.note.empty() ? "" : ": " + probe.note) + ")"};
  }
  struct stat st {};
  if (::lstat(cfg.socket.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
    throw config_error{"socket: " + cfg.socket + " exists and is not a socket"};
}

int serve(const config& cfg, const std::filesystem::path& config_path)
{
  spdlog::info("gpusortd {} starting (pid {})", GPUSORT_VERSION, ::getpid());
  // The engine first: with GPUs this initialises them, which READY=1 must wait for.
  engine eng{cfg};
  const std::vector<std::string> devices = eng.devices();
  const bool gpus = !devices.empty() && devices.front() != "cpu";
  host_pinning pinning{eng};
  const std::uint64_t pool_bytes =
      cfg.pinned_pool_bytes.value_or(service::default_host_budget());
  service::buffer_pool pool{pool_bytes, pinning.hooks()};
  // GPU jobs: one at a time, each takes every GPU and alone saturates the PCIe links.
  const unsigned workers = gpus ? 1U : cfg.max_running_jobs;
  service::job_queue queue{service::queue_limits_of(cfg, workers)};
  const std::uint64_t host_budget = queue.limits().host_budget;
  // Absolute: SIGHUP reads the same file whatever the working directory is by then.
  service::daemon_context ctx{cfg, eng, pool, queue, std::filesystem::absolute(config_path)};

  boost::asio::io_context io{1};
  service::server srv{io, ctx};
  srv.listen();
  srv.start();
  std::string devices_text;
  for (const std::string& d : devices) devices_text += (devices_text.empty() ? "" : ",") + d;
  spdlog::info("ready: devices {}, {} job(s) at once, host memory budget {}, shared buffers {}",
               devices_text, workers, format_bytes(host_budget),
               format_bytes(pool_bytes));
  service::sd_notify("READY=1\nSTATUS=serving on " + cfg.socket + " with " + devices_text);
  io.run();
  if (srv.exit_code() != exit_ok) {
    spdlog::info("gpusortd stopped: exit {}", srv.exit_code());
    return srv.exit_code();
  }
  spdlog::info("gpusortd stopped");
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv)
{
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpusortd"));
  spdlog::set_pattern("gpusortd: %l: %v");
  gpusort::detail::send_library_log_to_spdlog();
  std::optional<std::string> config_path;
  bool check_only = false;
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      return exit_ok;
    }
    if (arg == "--version") {
      std::printf("gpusortd %s\n", GPUSORT_VERSION);
      return exit_ok;
    }
    if (arg == "--check-config" || arg == "--print-config") {
      check_only = true;
      print = print || arg == "--print-config";
    } else if (arg == "--config" && i + 1 < argc && !config_path) {
      config_path = argv[++i];
    } else if (arg.starts_with("--config=") && !config_path) {
      config_path = std::string{arg.substr(9)};
    } else {
      std::fprintf(stderr, "gpusortd: unexpected argument '%s' (see --help)\n", argv[i]);
      return exit_usage;
    }
  }
  if (!config_path) {
    std::fprintf(stderr, "gpusortd: --config FILE is required (see --help)\n");
    return exit_usage;
  }
  config cfg;
  try {
    cfg = load_config(*config_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpusortd: %s\n", e.what());
    return exit_config;
  }
  if (check_only) {
    // One line, not the ~90 of every key: ExecStartPre and ExecReload put what this prints
    // into the journal at every start and reload; --print-config asks for the rest.
    try {
      check_startable(cfg);
    } catch (const config_error& e) {
      std::fprintf(stderr, "gpusortd: %s: %s\n", config_path->c_str(), e.what());
      return exit_config;
    }
    if (print)
      std::printf("%s", to_yaml(cfg).c_str());
    else
      std::printf("gpusortd: %s: the configuration is valid\n", config_path->c_str());
    std::fflush(stdout);
    return exit_ok;
  }
  gpusort::detail::set_program_log_level(cfg.level);
  // A client that disappears must not kill the daemon: sends use MSG_NOSIGNAL, and this covers
  // every other write.
  std::signal(SIGPIPE, SIG_IGN);
  // Until the server watches SIGHUP (once the engine has started, which with GPUs takes a
  // while), a reload asked for must not kill the daemon; the file was read just now anyway.
  std::signal(SIGHUP, SIG_IGN);
  try {
    return serve(cfg, *config_path);
  } catch (const config_error& e) {
    spdlog::critical("{}", e.what());
    service::sd_notify_quietly("STATUS=configuration error: " + std::string{e.what()});
    return exit_config;
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    service::sd_notify_quietly("STATUS=failed: " + std::string{e.what()});
    return exit_runtime;
  }
}
