// Filesystem helpers: read-only memory maps, whole-file reads, and atomic
// writes (temporary name, fsync, rename) so a crash never leaves half a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
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

// What a whole-file read takes at most (a config, a tokenizer, a task file, a text).
inline constexpr std::uint64_t kMaxReadBytes = 2ULL << 30;   // 2 GiB
inline constexpr std::uint64_t kMaxLineBytes = 64ULL << 20;  // one line of a line-based file: 64 MiB

// Opens `path` for reading if it is a regular file (never blocking on a FIFO):
// a folder, a FIFO, a device or a socket is refused naming the path. Returns
// the descriptor; the caller closes it.
int openRegularFile(const std::filesystem::path& path);

// The whole file, of at most `maxBytes` (a larger one is refused naming the
// file and the limit). Throws Error(Io).
std::string readFileBounded(const std::filesystem::path& path, std::uint64_t maxBytes = kMaxReadBytes);
std::string readTextFile(const std::filesystem::path& path);  // readFileBounded with the default limit

// Calls fn(line, number) for each line (without its newline; numbers from 1)
// of a regular file, refusing a line longer than `maxLineBytes` or a file
// longer than `maxFileBytes` with an error naming the file and the line.
void forEachLine(const std::filesystem::path& path, const std::function<void(std::string_view line, int number)>& fn,
                 std::uint64_t maxLineBytes = kMaxLineBytes, std::uint64_t maxFileBytes = kMaxReadBytes);

// The file `name` of a model folder `dir`, to be copied elsewhere: only a
// regular file whose real path lies inside `dir` (or, for a Hugging Face
// cache snapshot, inside its repository folder), never one of /proc, /sys or
// a device. std::nullopt when it does not exist; throws Error(BadModel)
// naming the link or file otherwise.
std::optional<std::string> readModelFile(const std::filesystem::path& dir, const std::string& name,
                                         std::uint64_t maxBytes = kMaxReadBytes);

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
long long writeBudgetLeftForTesting();  // < 0: no limit

}  // namespace latentlab
