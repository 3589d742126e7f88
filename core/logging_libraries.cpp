// spdlog's and fmt's compiled parts, once for the whole tree. In their header-only forms every
// source that logs compiled both libraries anew: 34 of the release build's 180 sources with
// fmt's and 12 with spdlog's, and under ASan with UBSan (gcc -O1) a source that includes
// <spdlog/spdlog.h> took 89 s that way against 30 s with the libraries compiled apart, one that
// includes <fmt/format.h> 30 s against 2.5 s (the dev VM under load): most of the asan build of
// the README's test command. Every target of ours now sees the libraries' declarations only
// (SPDLOG_COMPILED_LIB, fmt without FMT_HEADER_ONLY: cmake/gpusort_target.cmake), and this
// file holds what their -inl.h headers define, as Debian ships them (libspdlog-dev 1.10 built
// on the system's fmt 9, SPDLOG_FMT_EXTERNAL). It is a static archive, so the programs carry it
// as they carried the inline copies (no shared spdlog or fmt to ship to the GPU hosts:
// scripts/bundle.sh), and the package's libraries keep it local (cmake/exports.map).
//
// The templates are instantiated for what the tree uses: fmt's formatting of char strings and
// its float conversions, spdlog's console sinks (the default logger's and stderr_color_mt's)
// and the base sink under both mutexes. A use beyond them is an undefined symbol at link time.
#if !defined(SPDLOG_COMPILED_LIB) || defined(FMT_HEADER_ONLY)
#error "logging_libraries.cpp builds spdlog and fmt as compiled libraries (gpusort_target.cmake)"
#endif

#include <fmt/format-inl.h>

#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

#include <memory>
#include <mutex>
#include <string>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                         locale_ref);
}  // namespace detail
FMT_END_NAMESPACE

template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stderr_sink<spdlog::details::console_mutex>;
template std::shared_ptr<spdlog::logger> spdlog::stderr_color_mt<spdlog::synchronous_factory>(
    const std::string& logger_name, color_mode mode);
