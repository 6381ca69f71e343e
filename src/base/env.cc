// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The parts of the file layer (cairn/base/env.h) that any Env shares.

#include "cairn/base/env.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

CAIRN_NAMESPACE_BEGIN

namespace {

// strerror_r's text. glibc with _GNU_SOURCE (g++ defines it) declares the
// GNU form, which returns the text (in `buffer` or a static string); POSIX
// declares the XSI form, which fills `buffer` and returns 0 or an error
// number. Overloading on the return type takes whichever is declared.
[[maybe_unused]] const char* ErrorText(const char* text, const char*) {
  return text;
}
[[maybe_unused]] const char* ErrorText(int result, const char* buffer) {
  return result == 0 ? buffer : "Unknown error";
}

}  // namespace

Status IoError(std::string_view what, std::string_view path, int error) {
  std::string message(what);
  message += ' ';
  message += path;
  message += ": ";
  char buffer[256];
  message += ErrorText(strerror_r(error, buffer, sizeof(buffer)), buffer);
  switch (error) {
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(message);
    case ENOENT:
      return NotFoundError(message);
    case EEXIST:
      return AlreadyExistsError(message);
    case EISDIR:
      return InvalidArgumentError(message);
    default:
      return InternalError(message);
  }
}

Result<std::unique_ptr<FileHandle>> Env::NewDirectFile(const std::string& path,
                                                       FileOpenMode) {
  return InvalidArgumentError("this Env has no direct I/O: " + path);
}

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

CAIRN_NAMESPACE_END
