// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The parts of the file layer (cairn/base/env.h) that any Env shares.

#include "cairn/base/env.h"

#include <cerrno>
#include <cstring>
#include <string>

CAIRN_NAMESPACE_BEGIN

Status IoError(std::string_view what, std::string_view path, int error) {
  std::string message(what);
  message += ' ';
  message += path;
  message += ": ";
  message += std::strerror(error);
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

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

CAIRN_NAMESPACE_END
