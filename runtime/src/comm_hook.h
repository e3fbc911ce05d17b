// Options::comm_hook: gradient compression for the all-reduce, as DDP's fp16_compress_hook and
// bf16_compress_hook. The averaged gradients of a bucket travel in a 16-bit dtype and are
// widened back when the sum arrives.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace accelerate::detail {

enum class CommHook { No, FP16, BF16 };

/// "no", "fp16" or "bf16"; anything else throws std::invalid_argument naming it and where the
/// setting comes from.
CommHook parse_comm_hook(const std::string &text);

/// The dtype gradients are summed in, or nullopt when they travel as they are.
std::optional<c10::ScalarType> wire_dtype(CommHook hook);

} // namespace accelerate::detail
