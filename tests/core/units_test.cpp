// Expected values are written out by hand (powers of 1000 and 1024 as literals), never derived
// from the parser.
#include <gpusort/units.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace {

using gpusort::format_bytes;
using gpusort::parse_bytes;
using gpusort::parse_count;

constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();

TEST(ParseBytes, PlainIntegers)
{
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("1"), 1u);
  EXPECT_EQ(parse_bytes("512"), 512u);
  EXPECT_EQ(parse_bytes("007"), 7u);
  EXPECT_EQ(parse_bytes("4294967296"), 4294967296u);  // past 2^32
  EXPECT_EQ(parse_bytes("18446744073709551615"), max64);
  EXPECT_EQ(parse_bytes("000000000000000000000018446744073709551615"), max64);
}

TEST(ParseBytes, DecimalSuffixes)
{
  EXPECT_EQ(parse_bytes("1B"), 1u);
  EXPECT_EQ(parse_bytes("1K"), 1000u);
  EXPECT_EQ(parse_bytes("1k"), 1000u);
  EXPECT_EQ(parse_bytes("1KB"), 1000u);
  EXPECT_EQ(parse_bytes("1kB"), 1000u);
  EXPECT_EQ(parse_bytes("5M"), 5000000u);
  EXPECT_EQ(parse_bytes("5MB"), 5000000u);
  EXPECT_EQ(parse_bytes("7GB"), 7000000000u);
  EXPECT_EQ(parse_bytes("7G"), 7000000000u);
  EXPECT_EQ(parse_bytes("3TB"), 3000000000000u);
  EXPECT_EQ(parse_bytes("3T"), 3000000000000u);
  EXPECT_EQ(parse_bytes("2PB"), 2000000000000000u);
  EXPECT_EQ(parse_bytes("18EB"), 18000000000000000000u);
  EXPECT_EQ(parse_bytes("18E"), 18000000000000000000u);
}

TEST(ParseBytes, BinarySuffixes)
{
  EXPECT_EQ(parse_bytes("1Ki"), 1024u);
  EXPECT_EQ(parse_bytes("1KiB"), 1024u);
  EXPECT_EQ(parse_bytes("1kiB"), 1024u);
  EXPECT_EQ(parse_bytes("64KiB"), 65536u);
  EXPECT_EQ(parse_bytes("8MiB"), 8388608u);
  EXPECT_EQ(parse_bytes("8Mi"), 8388608u);
  EXPECT_EQ(parse_bytes("40GiB"), 42949672960u);
  EXPECT_EQ(parse_bytes("4Gi"), 4294967296u);
  EXPECT_EQ(parse_bytes("2TiB"), 2199023255552u);
  EXPECT_EQ(parse_bytes("1PiB"), 1125899906842624u);
  EXPECT_EQ(parse_bytes("1EiB"), 1152921504606846976u);
  EXPECT_EQ(parse_bytes("15EiB"), 17293822569102704640u);
}

TEST(ParseBytes, Overflow)
{
  EXPECT_EQ(parse_bytes("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_bytes("99999999999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_bytes("16EiB"), std::nullopt);  // exactly 2^64
  EXPECT_EQ(parse_bytes("19EB"), std::nullopt);
  EXPECT_EQ(parse_bytes("18446744073709551615K"), std::nullopt);
  EXPECT_EQ(parse_bytes("17179869184GiB"), std::nullopt);  // 2^34 GiB = 2^64
  EXPECT_EQ(parse_bytes("17179869183GiB"), 18446744072635809792u);
  // The largest value written as a fraction of an EiB, and one byte (in the last digit) more.
  EXPECT_EQ(parse_bytes("15.999999999999999999132638262011596452794037759304046630859375EiB"),
            max64);
  EXPECT_EQ(parse_bytes("16.000000000000000000000000000000000000000000000000000000000000EiB"),
            std::nullopt);
  EXPECT_EQ(parse_bytes("18446744073709551615.0"), max64);
  EXPECT_EQ(parse_bytes("18446744073709551615.5K"), std::nullopt);
}

TEST(ParseBytes, DecimalsThatGiveWholeBytes)
{
  EXPECT_EQ(parse_bytes("1.5GiB"), 1610612736u);
  EXPECT_EQ(parse_bytes("1.50 GiB"), 1610612736u);
  EXPECT_EQ(parse_bytes("0.5KiB"), 512u);
  EXPECT_EQ(parse_bytes("0.25Ki"), 256u);
  EXPECT_EQ(parse_bytes("2.0"), 2u);
  EXPECT_EQ(parse_bytes("2.000B"), 2u);
  EXPECT_EQ(parse_bytes("0.001KB"), 1u);
  EXPECT_EQ(parse_bytes("1.234567MB"), 1234567u);
  EXPECT_EQ(parse_bytes("0.0009765625KiB"), 1u);  // 1/1024 KiB
  EXPECT_EQ(parse_bytes("0.0000000000009094947017729282379150390625TiB"), 1u);  // 2^-40 TiB
  EXPECT_EQ(parse_bytes("0.0"), 0u);
}

TEST(ParseBytes, DecimalsThatDoNotGiveWholeBytes)
{
  EXPECT_EQ(parse_bytes("1.5"), std::nullopt);
  EXPECT_EQ(parse_bytes("1.5B"), std::nullopt);
  EXPECT_EQ(parse_bytes("1.1KiB"), std::nullopt);    // 1126.4
  EXPECT_EQ(parse_bytes("0.0001KB"), std::nullopt);  // 0.1
  EXPECT_EQ(parse_bytes("1.2345678MB"), std::nullopt);
  EXPECT_EQ(parse_bytes("0.00048828125KiB"), std::nullopt);  // half a byte
}

TEST(ParseBytes, Spaces)
{
  EXPECT_EQ(parse_bytes("8 MiB"), 8388608u);
  EXPECT_EQ(parse_bytes("8\tMiB"), 8388608u);
  EXPECT_EQ(parse_bytes("8   B"), 8u);
  EXPECT_EQ(parse_bytes(" 8MiB"), std::nullopt);
  EXPECT_EQ(parse_bytes("8MiB "), std::nullopt);
  EXPECT_EQ(parse_bytes("8 "), std::nullopt);
  EXPECT_EQ(parse_bytes("8 Mi B"), std::nullopt);
  EXPECT_EQ(parse_bytes("8 M iB"), std::nullopt);
}

TEST(ParseBytes, Garbage)
{
  for (const std::string_view bad :
       {"", " ", "B", "MiB", "lots", "auto", "-1", "+1", "-0", "1e9", "1E9", "0x10", "1.", ".5K",
        "1..5", "1.5.5", "1,000", "1_000", "1'000", "8mib", "8MIB", "8Mib", "8mb", "8m", "8b",
        "8KiBB", "8BB", "8iB", "8Bi", "8 B B", "8KB8", "8k8", "8X", "8Yi", "NaN", "inf",
        "\xef\xbc\x98"}) {
    EXPECT_EQ(parse_bytes(bad), std::nullopt) << '"' << bad << '"';
  }
  EXPECT_EQ(parse_bytes(std::string_view{"8\0", 2}), std::nullopt);
  EXPECT_EQ(parse_bytes(std::string_view{"8MiB\0", 5}), std::nullopt);
}

TEST(ParseCount, Examples)
{
  EXPECT_EQ(parse_count("1000"), 1000u);
  EXPECT_EQ(parse_count("0"), 0u);
  EXPECT_EQ(parse_count("10k"), 10000u);
  EXPECT_EQ(parse_count("10K"), 10000u);
  EXPECT_EQ(parse_count("10M"), 10000000u);
  EXPECT_EQ(parse_count("200M"), 200000000u);
  EXPECT_EQ(parse_count("3G"), 3000000000u);
  EXPECT_EQ(parse_count("5G"), 5000000000u);  // past 2^32 elements
  EXPECT_EQ(parse_count("2T"), 2000000000000u);
  EXPECT_EQ(parse_count("1P"), 1000000000000000u);
  EXPECT_EQ(parse_count("1E"), 1000000000000000000u);
  EXPECT_EQ(parse_count("2Ki"), 2048u);
  EXPECT_EQ(parse_count("1Mi"), 1048576u);
  EXPECT_EQ(parse_count("1Gi"), 1073741824u);
  EXPECT_EQ(parse_count("4Gi"), 4294967296u);
  EXPECT_EQ(parse_count("1Ti"), 1099511627776u);
  EXPECT_EQ(parse_count("1.5M"), 1500000u);
  EXPECT_EQ(parse_count("1.000001M"), 1000001u);
  EXPECT_EQ(parse_count("0.5Ki"), 512u);
  EXPECT_EQ(parse_count("10 M"), 10000000u);
}

TEST(ParseCount, RejectsByteUnitsAndGarbage)
{
  for (const std::string_view bad :
       {"", "8B", "10MB", "1KiB", "1GiB", "1.5", "1.0000001M", "-5", "+5", "1e6", "10m", "ten",
        "10 ", " 10", "10MM", "0x1F"}) {
    EXPECT_EQ(parse_count(bad), std::nullopt) << '"' << bad << '"';
  }
}

TEST(ParseCount, Overflow)
{
  EXPECT_EQ(parse_count("18446744073709551615"), max64);
  EXPECT_EQ(parse_count("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_count("18E"), 18000000000000000000u);
  EXPECT_EQ(parse_count("18.446744073709551615E"), max64);
  EXPECT_EQ(parse_count("18.446744073709551616E"), std::nullopt);
  EXPECT_EQ(parse_count("19E"), std::nullopt);
  EXPECT_EQ(parse_count("16Ei"), std::nullopt);
  EXPECT_EQ(parse_count("18446744073709552k"), std::nullopt);
  EXPECT_EQ(parse_count("18446744073709551k"), 18446744073709551000u);
}

TEST(FormatBytes, BelowOneKiBInBytes)
{
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1), "1 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
}

TEST(FormatBytes, TwoDecimalsOfTheLargestUnit)
{
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(8388608), "8.00 MiB");
  EXPECT_EQ(format_bytes(1610612736), "1.50 GiB");
  EXPECT_EQ(format_bytes(42949672960), "40.00 GiB");
  EXPECT_EQ(format_bytes(2199023255552), "2.00 TiB");
  EXPECT_EQ(format_bytes(1125899906842624), "1.00 PiB");
  EXPECT_EQ(format_bytes(1152921504606846976), "1.00 EiB");
  EXPECT_EQ(format_bytes(max64), "16.00 EiB");
}

TEST(FormatBytes, RoundsHalfUpAndCarriesIntoTheNextUnit)
{
  EXPECT_EQ(format_bytes(1152), "1.13 KiB");  // 1.125 exactly: half up
  EXPECT_EQ(format_bytes(1151), "1.12 KiB");
  EXPECT_EQ(format_bytes(1024 * 1023 + 1018), "1023.99 KiB");
  EXPECT_EQ(format_bytes(1024 * 1023 + 1019), "1.00 MiB");  // 1023.995 -> 1024.00 KiB
  EXPECT_EQ(format_bytes(1048575), "1.00 MiB");
  EXPECT_EQ(format_bytes(1152921504606846975), "1.00 EiB");  // 2^60 - 1
}

TEST(FormatBytes, ReadsBackWhenExact)
{
  for (const std::uint64_t v : {std::uint64_t{1536}, std::uint64_t{8388608},
                                std::uint64_t{1610612736}, std::uint64_t{42949672960}}) {
    EXPECT_EQ(parse_bytes(format_bytes(v)), v) << format_bytes(v);
  }
}

}  // namespace
