// Memory maps and atomic writes.
#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {
std::string errnoText(int err) {
  if (err == ENOSPC) return "no space left on device (disk full)";
  if (err == EDQUOT) return "disk quota exceeded (disk full)";
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
}  // namespace

void setWriteBudgetForTesting(long long bytes) {
  writeBudget().store(bytes < 0 ? -1 : bytes);
}
long long writeBudgetLeftForTesting() {
  return writeBudget().load();
}

MappedFile::MappedFile(const fs::path& path) : m_path(path) {
  // A regular file only: a FIFO would block the open for ever, a device has no end.
  int fd = openRegularFile(path);
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

MappedFile::~MappedFile() {
  release();
}

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

int openRegularFile(const fs::path& path) {
  // Non-blocking, so that opening a FIFO returns at once instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw Error(ErrorCode::Io, path.string() + ": file not found");
    throw Error(ErrorCode::Io, path.string() + ": cannot open for reading: " + errnoText(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool folder = S_ISDIR(st.st_mode);
    ::close(fd);
    throw Error(ErrorCode::Io,
                path.string() + (folder ? ": is a folder, not a file"
                                        : ": is not a regular file (a FIFO, a device or a socket), so it is not read"),
                "Give the path of a file.");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

namespace {
std::string limitText(std::uint64_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Reads from fd until EOF, at most `limit` bytes (one more is an error naming `path`).
std::string readAllFrom(int fd, const fs::path& path, std::uint64_t limit) {
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::Io, path.string() + ": read failed: " + errnoText(errno));
    }
    if (n == 0) return out;
    if (out.size() + static_cast<std::size_t>(n) > limit) {
      throw Error(ErrorCode::Io,
                  path.string() + ": larger than " + limitText(limit) + ", the most LatentLab reads there");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}
}  // namespace

std::string readFileBounded(const fs::path& path, std::uint64_t maxBytes) {
  const int fd = openRegularFile(path);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    throw Error(ErrorCode::Io,
                path.string() + ": larger than " + limitText(maxBytes) + ", the most LatentLab reads there");
  }
  try {
    std::string out = readAllFrom(fd, path, maxBytes);
    ::close(fd);
    return out;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::string readTextFile(const fs::path& path) {
  return readFileBounded(path, kMaxReadBytes);
}

void forEachLine(const fs::path& path, const std::function<void(std::string_view line, int number)>& fn,
                 std::uint64_t maxLineBytes, std::uint64_t maxFileBytes) {
  const int fd = openRegularFile(path);
  std::string line;
  std::uint64_t total = 0;
  int number = 1;
  char buf[1 << 16];
  try {
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error(ErrorCode::Io, path.string() + ": read failed: " + errnoText(errno));
      }
      if (n == 0) break;
      total += static_cast<std::uint64_t>(n);
      if (total > maxFileBytes) {
        throw Error(ErrorCode::Io,
                    path.string() + ": larger than " + limitText(maxFileBytes) + ", the most LatentLab reads there");
      }
      std::string_view chunk(buf, static_cast<std::size_t>(n));
      while (!chunk.empty()) {
        const auto nl = chunk.find('\n');
        const auto take = nl == std::string_view::npos ? chunk.size() : nl;
        if (line.size() + take > maxLineBytes) {
          throw Error(ErrorCode::Io, path.string() + ":" + std::to_string(number) + ": a line longer than " +
                                         limitText(maxLineBytes) + ", the most LatentLab reads");
        }
        line.append(chunk.substr(0, take));
        if (nl == std::string_view::npos) break;
        fn(line, number++);
        line.clear();
        chunk.remove_prefix(nl + 1);
      }
    }
    if (!line.empty()) fn(line, number);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

std::optional<std::string> readModelFile(const fs::path& dir, const std::string& name, std::uint64_t maxBytes) {
  const fs::path file = dir / name;
  std::error_code ec;
  const auto status = fs::symlink_status(file, ec);
  if (ec || !fs::exists(status)) return std::nullopt;
  const fs::path real = fs::canonical(file, ec);
  if (ec) throw Error(ErrorCode::BadModel, file.string() + ": a link to nothing (" + ec.message() + ")");
  // Inside the folder, or for a Hugging Face cache snapshot (.../snapshots/REV/) inside the
  // repository folder two levels up, whose blobs/ the snapshot's links point into.
  const fs::path root = fs::canonical(dir, ec);
  auto inside = [&](const fs::path& base) {
    auto r = real.begin();
    for (auto b = base.begin(); b != base.end(); ++b, ++r) {
      if (r == real.end() || *r != *b) return false;
    }
    return true;
  };
  const bool snapshot = root.has_parent_path() && root.parent_path().filename() == "snapshots";
  if (!inside(root) && !(snapshot && inside(root.parent_path().parent_path()))) {
    throw Error(ErrorCode::BadModel, file.string() + ": a link to " + real.string() + ", outside the model folder",
                "LatentLab copies only files of the model folder itself; replace the link by the file.");
  }
  static const std::vector<fs::path> kSystem = {"/proc", "/sys", "/dev"};
  for (const auto& sys : kSystem) {
    if (inside(sys))
      throw Error(ErrorCode::BadModel, file.string() + ": " + real.string() + " is a system file, not copied");
  }
  return readFileBounded(real, maxBytes);
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
                  err == ENOSPC || err == EDQUOT ? "Free disk space and try again; nothing was replaced." : "");
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

}  // namespace latentlab
