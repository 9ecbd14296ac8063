// Memory maps and atomic writes.
#include "common/file_util.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {
std::string errnoText(int err) {
  if (err == ENOSPC) return "no space left on device (disk full)";
  return std::strerror(err);
}

// Bytes writeAll may still write before it reports a full disk; < 0: no limit.
std::atomic<long long>& writeBudget() {
  static std::atomic<long long> budget = [] {
    const char* env = std::getenv("LATENTLAB_FAULT_DISK_BYTES");
    if (env == nullptr || *env == '\0') return -1LL;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    return (end != env && *end == '\0' && v >= 0) ? v : -1LL;
  }();
  return budget;
}

// The share of `size` bytes the budget allows now (all of it when unlimited).
std::size_t allowedBytes(std::size_t size) {
  auto& budget = writeBudget();
  long long left = budget.load();
  while (left >= 0) {
    const long long take = std::min<long long>(left, static_cast<long long>(size));
    if (budget.compare_exchange_weak(left, left - take)) return static_cast<std::size_t>(take);
  }
  return size;
}
} // namespace

void setWriteBudgetForTesting(long long bytes) { writeBudget().store(bytes < 0 ? -1 : bytes); }
long long writeBudgetLeftForTesting() { return writeBudget().load(); }

MappedFile::MappedFile(const fs::path& path) : m_path(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::Io, path.string() + ": cannot open: " + errnoText(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(ErrorCode::Io, path.string() + ": cannot stat: " + errnoText(err));
  }
  m_size = static_cast<std::size_t>(st.st_size);
  if (m_size > 0) {
    void* p = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(ErrorCode::Io, path.string() + ": cannot map: " + errnoText(err));
    }
    m_data = static_cast<const std::byte*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path)), m_data(other.m_data), m_size(other.m_size) {
  other.m_data = nullptr;
  other.m_size = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    m_path = std::move(other.m_path);
    m_data = other.m_data;
    m_size = other.m_size;
    other.m_data = nullptr;
    other.m_size = 0;
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (m_data != nullptr) {
    ::munmap(const_cast<std::byte*>(m_data), m_size);
    m_data = nullptr;
  }
}

std::string readTextFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error(ErrorCode::Io, path.string() + ": file not found");
    throw Error(ErrorCode::Io, path.string() + ": cannot open for reading");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeAll(int fd, const void* data, std::size_t size, const fs::path& what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t allowed = allowedBytes(size);
    ssize_t n = allowed == 0 ? -1 : ::write(fd, p, allowed);
    if (allowed == 0) errno = ENOSPC;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw Error(ErrorCode::Io, what.string() + ": write failed: " + errnoText(err),
                  err == ENOSPC ? "Free disk space and try again; nothing was replaced." : "");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void atomicWrite(const fs::path& path, const std::function<void(int fd)>& write) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(ErrorCode::Io, path.string() + ": cannot create: " + errnoText(errno));
  }
  try {
    write(fd);
    if (::fsync(fd) != 0) {
      throw Error(ErrorCode::Io, path.string() + ": fsync failed: " + errnoText(errno));
    }
  } catch (...) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  if (::close(fd) != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(ErrorCode::Io, path.string() + ": close failed: " + errnoText(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorCode::Io, path.string() + ": rename failed: " + ec.message());
  }
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void atomicWriteText(const fs::path& path, std::string_view text) {
  atomicWrite(path, [&](int fd) { writeAll(fd, text.data(), text.size(), path); });
}

} // namespace latentlab
