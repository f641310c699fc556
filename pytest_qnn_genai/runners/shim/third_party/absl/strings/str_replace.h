// pytest-qnn-genai: the one absl function the tokenizers' sentencepiece.cpp uses.
//
// sentencepiece.cpp includes "third_party/absl/strings/str_replace.h", the header of
// sentencepiece's own vendored absl copy; Debian's libsentencepiece-dev does not ship it, and
// Debian's abseil (libabsl-dev) clashes with the `absl::string_view` alias sentencepiece's public
// header declares. This header provides absl::StrReplaceAll: every occurrence of each `from` is
// replaced by its `to`, one pair after the other, scanning left to right without overlap.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace absl {

inline std::string StrReplaceAll(
    std::string_view text,
    std::initializer_list<std::pair<std::string_view, std::string_view>> replacements) {
  std::string result(text);
  for (const auto& [from, to] : replacements) {
    if (from.empty()) {
      continue;
    }
    std::string replaced;
    std::size_t start = 0;
    for (std::size_t hit = result.find(from); hit != std::string::npos;
         hit = result.find(from, start)) {
      replaced.append(result, start, hit - start).append(to);
      start = hit + from.size();
    }
    replaced.append(result, start, std::string::npos);
    result = std::move(replaced);
  }
  return result;
}

}  // namespace absl
