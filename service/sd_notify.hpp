// systemd's readiness protocol without libsystemd: one datagram per state change to the socket
// that $NOTIFY_SOCKET names (a path, or an abstract address written with a leading '@').
//
// The unit is Type=notify, so systemd considers the daemon started only when READY=1 arrives:
// the daemon sends it once the engine (the GPUs) is initialised and the socket is bound, so that
// units ordered after gpusortd find it answering.
#pragma once

#include <string>
#include <string_view>

namespace gpusort::service {

/// Sends `state` ("READY=1", "STOPPING=1", "STATUS=...", several joined by '\n') to
/// $NOTIFY_SOCKET. Returns false, and sends nothing, when the variable is unset (not run by
/// systemd); throws std::system_error when the variable is set but the datagram cannot be sent
/// (a bad address is a broken unit, better said loudly once than ignored).
bool sd_notify(std::string_view state);

/// sd_notify that logs failures instead of throwing: for shutdown paths and status lines.
void sd_notify_quietly(std::string_view state) noexcept;

}  // namespace gpusort::service
