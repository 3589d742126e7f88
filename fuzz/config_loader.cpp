// Fuzzes gpusort::parse_config (config/) with arbitrary text. Input: the YAML text.
//
// Contracts checked (include/gpusort/config.hpp):
// - parse_config returns a config or throws gpusort::config_error; any other exception escaping
//   is a bug (yaml-cpp's own exceptions, std::out_of_range from a conversion, ...);
// - a config_error's message names where: it starts with the source name given;
// - to_yaml writes "what parse_config would read back": parse_config(to_yaml(cfg)) == cfg.
#include <gpusort/config.hpp>
#include <gpusort/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

namespace {

constexpr std::string_view source = "fuzz.yaml";

[[noreturn]] void broken(const std::string& what)
{
  std::fprintf(stderr, "config contract broken: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  gpusort::config cfg;
  try {
    cfg = gpusort::parse_config(text, source);
  } catch (const gpusort::config_error& e) {
    if (!std::string_view{e.what()}.starts_with(source))
      broken(std::string{"config_error without the source name: "} + e.what());
    return 0;
  } catch (const std::exception& e) {
    broken(std::string{"parse_config threw "} + typeid(e).name() + ": " + e.what());
  } catch (...) {
    broken("parse_config threw something that is not a std::exception");
  }

  const std::string written = gpusort::to_yaml(cfg);
  try {
    if (gpusort::parse_config(written, "to_yaml") != cfg)
      broken("to_yaml's text reads back as another config:\n" + written);
  } catch (const std::exception& e) {
    broken(std::string{"to_yaml's text does not read back: "} + e.what() + "\n" + written);
  }
  return 0;
}
