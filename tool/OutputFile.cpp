//===- OutputFile.cpp - Writing results without partial files -------------===//
#include "OutputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <unistd.h>

namespace accel::tool {

llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Contents) {
  namespace fs = llvm::sys::fs;
  // Rename replaces a symbolic link itself, so write next to the file it points at.
  llvm::SmallString<256> Target(Path);
  if (fs::exists(Path)) {
    if (std::error_code EC = fs::real_path(Path, Target)) {
      return llvm::createFileError(Path, EC);
    }
  }
  unsigned Mode = 0666; // Less the umask, as for any new file.
  if (llvm::ErrorOr<fs::perms> Existing = fs::getPermissions(Target)) {
    Mode = *Existing;
  }

  // The temporary file must be in the same directory: rename is atomic only within a file
  // system.
  llvm::SmallString<256> TempPath;
  int FD = -1;
  if (std::error_code EC =
          fs::createUniqueFile(Target + ".accel-tmp-%%%%%%", FD, TempPath, fs::OF_None, Mode)) {
    return llvm::createFileError(Path, EC);
  }
  llvm::sys::RemoveFileOnSignal(TempPath);
  auto Discard = [&](std::error_code EC) {
    // Best effort: the failure to report is EC, not this one.
    std::error_code RemoveError = fs::remove(TempPath);
    (void)RemoveError;
    llvm::sys::DontRemoveFileOnSignal(TempPath);
    return llvm::createFileError(Path, EC);
  };

  llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
  OS << Contents;
  OS.flush();
  // On disk before the rename makes it the file: a crash never leaves an empty or partial
  // file under the real name.
  std::error_code SyncError;
  if (!OS.has_error() && ::fsync(FD) != 0) {
    SyncError = std::error_code(errno, std::generic_category());
  }
  OS.close();
  if (OS.has_error()) {
    std::error_code EC = OS.error();
    OS.clear_error(); // Otherwise raw_fd_ostream aborts on destruction.
    return Discard(EC);
  }
  if (SyncError) {
    return Discard(SyncError);
  }
  if (std::error_code EC = fs::rename(TempPath, Target)) {
    return Discard(EC);
  }
  llvm::sys::DontRemoveFileOnSignal(TempPath);
  // The rename itself lasts once the directory is on disk.
  llvm::SmallString<256> Directory = llvm::sys::path::parent_path(Target);
  if (Directory.empty()) {
    Directory = ".";
  }
  int DirectoryFD = ::open(Directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (DirectoryFD >= 0) {
    int Synced = ::fsync(DirectoryFD);
    ::close(DirectoryFD);
    if (Synced != 0) {
      return llvm::createFileError(Directory, std::error_code(errno, std::generic_category()));
    }
  }
  return llvm::Error::success();
}

} // namespace accel::tool
