//===- OutputFile.cpp - Writing results without partial files -------------===//
#include "OutputFile.h"

#include "atomic_file.h"

#include "llvm/Support/Signals.h"

#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>

namespace accel::tool {
namespace {
// Once the temporary is renamed or removed, a signal has nothing left to remove.
void forget(const std::string &Temporary) {
  if (!Temporary.empty()) {
    llvm::sys::DontRemoveFileOnSignal(Temporary);
  }
}
} // namespace

llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Contents) {
  // The runtime's and the launcher's atomic write (runtime/launch/atomic_file.h): a temporary
  // beside the file, flushed, renamed over it, the directory flushed. A signal while it is
  // written removes the temporary.
  std::string Temporary;
  try {
    accelerate::detail::write_atomically(Path.str(), [&](const std::string &Name) {
      Temporary = Name;
      llvm::sys::RemoveFileOnSignal(Temporary);
      std::ofstream Out(Name, std::ios::binary | std::ios::trunc);
      Out.write(Contents.data(), static_cast<std::streamsize>(Contents.size()));
      Out.flush();
      if (!Out) {
        throw std::system_error(errno, std::generic_category());
      }
    });
  } catch (const accelerate::detail::FileWriteError &Error) {
    forget(Temporary);
    if (Error.code()) {
      return llvm::createFileError(Path, Error.code());
    }
    return llvm::createStringError(std::errc::io_error, Error.what());
  } catch (const std::system_error &Error) { // std::filesystem's, resolving a link
    forget(Temporary);
    return llvm::createFileError(Path, Error.code());
  }
  forget(Temporary);
  return llvm::Error::success();
}

} // namespace accel::tool
