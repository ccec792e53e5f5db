// tide::testing::Deflate — zlib's deflate of a test body, for tests of gzip / deflate request
// bodies: `window_bits` 31 gives gzip, 15 zlib, -15 raw deflate. Test-only, header-only (link
// ZLIB::ZLIB); reports a zlib failure through GoogleTest.
#pragma once

#include <zlib.h>

#include <string>

#include "gtest/gtest.h"

namespace tide::testing {

inline std::string Deflate(const std::string& in, int window_bits = 31) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace tide::testing
