// Console output printed once per job: Accelerator::print and Accelerator::printf. See
// docs/runtime.md, "Output".
#include "accelerate/accelerator.h"

#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <streambuf>

namespace accelerate {
namespace {

// Accepts every character and keeps none, so the stream stays good (unlike an ostream with
// no buffer, which turns bad and would surprise code that checks it).
class DiscardingBuffer : public std::streambuf {
protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char_type *, std::streamsize count) override { return count; }
};

std::ostream &discarding_stream() {
  // Never destroyed: a static Accelerator's destructor may still print.
  static auto *buffer = new DiscardingBuffer();
  static auto *stream = new std::ostream(buffer);
  return *stream;
}

} // namespace

std::ostream &Accelerator::print() { return is_main_process() ? std::cout : discarding_stream(); }

int Accelerator::printf(const char *format, ...) {
  if (!is_main_process()) {
    return 0;
  }
  va_list arguments;
  va_start(arguments, format);
  const int written = std::vprintf(format, arguments);
  va_end(arguments);
  return written;
}

} // namespace accelerate
