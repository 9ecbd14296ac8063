// Filesystem helpers: read-only memory maps, whole-file reads, and atomic
// writes (temporary name, fsync, rename) so a crash never leaves half a file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace latentlab {

class MappedFile {
public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);  // throws Error(Io)
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::byte* data() const { return m_data; }
  std::size_t size() const { return m_size; }
  const std::filesystem::path& path() const { return m_path; }

private:
  void release() noexcept;
  std::filesystem::path m_path;
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
};

std::string readTextFile(const std::filesystem::path& path);  // throws Error(Io)

// Calls write(fd) on `path.tmp.<pid>`, fsyncs, renames over `path`, fsyncs the
// folder. On failure removes the temporary and throws Error(Io) naming path.
void atomicWrite(const std::filesystem::path& path, const std::function<void(int fd)>& write);
void atomicWriteText(const std::filesystem::path& path, std::string_view text);
// Writes all bytes to fd or throws Error(Io) (ENOSPC is named as a full disk).
// Every file LatentLab writes (models, optimiser state, trainer state, specs,
// exports) goes through here.
void writeAll(int fd, const void* data, std::size_t size, const std::filesystem::path& what);

// Fault injection for tests of full disks: after `bytes` more bytes have gone
// through writeAll in this process, writes fail with ENOSPC (a negative value
// turns it off, the default). The engine reads LATENTLAB_FAULT_DISK_BYTES at
// start-up so a test can fill the "disk" of a child process.
void setWriteBudgetForTesting(long long bytes);
long long writeBudgetLeftForTesting();   // < 0: no limit

} // namespace latentlab
