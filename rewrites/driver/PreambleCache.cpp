//===- PreambleCache.cpp - LibTorch's headers parsed once, kept on disk ---===//
#include "PreambleCache.h"

#include "clang/Basic/Version.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Frontend/Utils.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Lex/PreprocessorOptions.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <unistd.h>

namespace accel::tool {
namespace {

/// Bump when what goes into a PCH or the entry's layout changes: entries of other versions
/// then never match a key.
constexpr llvm::StringLiteral FormatVersion = "accel-preamble 1";
/// The trailer that ends an entry: magic, the PCH's size, the manifest's size.
constexpr llvm::StringLiteral TrailerMagic = "ACCELPRE";
constexpr size_t TrailerSize = 8 + 8 + 8;
/// Entries unused this long are removed when a new one is written (and, past the size limit,
/// the least recently used: removeOldEntries).
constexpr auto UnusedEntryLifetime = std::chrono::hours(24 * 30);
/// A temporary file this old belongs to a run that died (one whose writer is known to be gone
/// goes at once: writtenByAGoneProcess).
constexpr auto AbandonedTemporaryAge = std::chrono::hours(24);

/// This machine's name as a temporary's name holds it: letters and digits only, so that the
/// name's fields stay apart at '-'.
std::string hostTag() {
  char Name[256] = {};
  if (gethostname(Name, sizeof(Name) - 1) != 0) {
    return "unknown";
  }
  std::string Tag;
  for (const char *C = Name; *C && Tag.size() < 32; ++C) {
    Tag += llvm::isAlnum(*C) ? *C : '_';
  }
  return Tag.empty() ? "unknown" : Tag;
}

/// Whether a temporary ("tmp-KEY-HOST-PID-RANDOM.pch", and clang's own beside it) was written by
/// a process of this machine that no longer runs: a run killed while it built a preamble
/// (73 MB of PCH). Temporaries of other machines sharing the directory keep the age rule.
bool writtenByAGoneProcess(llvm::StringRef Name) {
  llvm::SmallVector<llvm::StringRef, 6> Fields;
  Name.split(Fields, '-', /*MaxSplit=*/4);
  unsigned Pid = 0;
  if (Fields.size() < 5 || Fields[2] != hostTag() || Fields[3].getAsInteger(10, Pid) || Pid == 0) {
    return false;
  }
  return ::kill(static_cast<pid_t>(Pid), 0) != 0 && errno == ESRCH;
}

std::string digestOf(llvm::StringRef Bytes) {
  llvm::BLAKE3 Hasher;
  Hasher.update(Bytes);
  auto Result = Hasher.final<16>();
  return llvm::toHex(Result, /*LowerCase=*/true);
}

/// The preamble's directives as tokens, with a space where the source has whitespace and a
/// line break where a line starts: what the preprocessor sees, without the comments and
/// layout that differ between files including the same headers.
std::string directiveTokens(llvm::StringRef Preamble, const clang::LangOptions &LangOpts) {
  const std::string Text = Preamble.str(); // The lexer reads up to a terminating NUL.
  clang::Lexer Raw(clang::SourceLocation(), LangOpts, Text.data(), Text.data(),
                   Text.data() + Text.size());
  Raw.SetCommentRetentionState(false);
  std::string Result;
  clang::Token Tok;
  while (true) {
    Raw.LexFromRawLexer(Tok);
    if (Tok.is(clang::tok::eof)) {
      break;
    }
    if (Tok.isAtStartOfLine()) {
      Result += '\n';
    } else if (Tok.hasLeadingSpace()) {
      Result += ' ';
    }
    // The lexer stands just past the token it returned.
    Result.append(Raw.getBufferLocation() - Tok.getLength(), Tok.getLength());
  }
  return Result;
}

/// Everything that changes what the preamble's PCH holds, except the headers' contents
/// (those are checked on each use, see changedDependency): the directives, the compile
/// flags, this clang, and the directories relative names are looked up in.
std::string keyFor(const clang::CompilerInvocation &Invocation, llvm::StringRef Directives,
                   llvm::StringRef MainFile, llvm::vfs::FileSystem &FS) {
  clang::CompilerInvocation Flags(Invocation);
  // What names this one file, and what only code generation reads.
  Flags.getFrontendOpts().Inputs.clear();
  Flags.getFrontendOpts().OutputFile.clear();
  Flags.getCodeGenOpts().MainFileName.clear();
  Flags.getCodeGenOpts().DebugCompilationDir.clear();
  Flags.getCodeGenOpts().CoverageCompilationDir.clear();
  Flags.getDependencyOutputOpts() = clang::DependencyOutputOptions();
  // The driver adds these only when stderr is a terminal; they change no declaration.
  Flags.getDiagnosticOpts().ShowColors = false;
  Flags.getDiagnosticOpts().MessageLength = 0;
  // A directory given twice is searched once (clang drops the later one): `-I dir` repeated
  // by a build that also passes it through its own flags means the same.
  auto &Entries = Flags.getHeaderSearchOpts().UserEntries;
  for (auto Entry = Entries.begin(); Entry != Entries.end();) {
    const bool Repeated = std::any_of(Entries.begin(), Entry, [&](const auto &Earlier) {
      return Earlier.Path == Entry->Path && Earlier.Group == Entry->Group &&
             Earlier.IsFramework == Entry->IsFramework &&
             Earlier.IgnoreSysRoot == Entry->IgnoreSysRoot;
    });
    Entry = Repeated ? Entries.erase(Entry) : Entry + 1;
  }
  std::string Key;
  llvm::raw_string_ostream Out(Key);
  Out << FormatVersion << '\0' << clang::getClangFullRepositoryVersion() << '\0';
  for (const std::string &Arg : Flags.getCC1CommandLine()) {
    Out << Arg << '\0';
  }
  Out << Directives << '\0';
  // "file.h" is looked up next to the including file first (a quote in a comment names no
  // file: the directives are what counts).
  if (Directives.contains('"')) {
    Out << llvm::sys::path::parent_path(MainFile) << '\0';
  }
  // -I dir (relative) is looked up from the working directory.
  for (const auto &Entry : Invocation.getHeaderSearchOpts().UserEntries) {
    if (llvm::sys::path::is_relative(Entry.Path)) {
      if (llvm::ErrorOr<std::string> WorkingDir = FS.getCurrentWorkingDirectory()) {
        Out << *WorkingDir << '\0';
      }
      break;
    }
  }
  return digestOf(Key);
}

/// The headers the PCH build opened (system headers too).
class HeaderCollector : public clang::DependencyCollector {
  bool needSystemDependencies() override { return true; }
};

/// A header the PCH build read, as the preprocessor named it, and the digest of the text it
/// parsed; Readable is false when the text could not be had.
struct ReadHeader {
  std::string Name;
  std::string Digest;
  uint64_t Size = 0;
  bool Readable = false;
};

/// Builds the PCH, recording every header the preprocessor opens and what it held: Read is
/// set once the build is over.
class PchBuilder : public clang::tooling::FrontendActionFactory {
public:
  explicit PchBuilder(std::optional<std::vector<ReadHeader>> &Read) : Read(Read) {}

  std::unique_ptr<clang::FrontendAction> create() override {
    return std::make_unique<Action>(Read);
  }

private:
  class Action : public clang::GeneratePCHAction {
  public:
    explicit Action(std::optional<std::vector<ReadHeader>> &Read) : Read(Read) {}

  protected:
    bool BeginSourceFileAction(clang::CompilerInstance &Compiler) override {
      Collector->attachToPreprocessor(Compiler.getPreprocessor());
      return GeneratePCHAction::BeginSourceFileAction(Compiler);
    }

    /// Digests each header from the text clang parsed, still held by its SourceManager:
    /// no second read of ~5,100 files, and the digest is of what went into the PCH even if
    /// a header is edited while the PCH is built (the next use then sees the edit). A header
    /// only looked up (__has_include) is read here.
    void EndSourceFileAction() override {
      clang::CompilerInstance &Compiler = getCompilerInstance();
      clang::SourceManager &Sources = Compiler.getSourceManager();
      std::vector<ReadHeader> Headers;
      for (const std::string &Name : Collector->getDependencies()) {
        ReadHeader Header{Name, "", 0, false};
        if (clang::OptionalFileEntryRef File = Compiler.getFileManager().getOptionalFileRef(Name)) {
          if (std::optional<llvm::MemoryBufferRef> Text =
                  Sources.getMemoryBufferForFileOrNone(*File)) {
            Header.Digest = digestOf(Text->getBuffer());
            Header.Size = Text->getBufferSize();
            Header.Readable = true;
          }
        }
        Headers.push_back(std::move(Header));
      }
      Read = std::move(Headers);
      GeneratePCHAction::EndSourceFileAction();
    }

  private:
    std::shared_ptr<HeaderCollector> Collector = std::make_shared<HeaderCollector>();
    std::optional<std::vector<ReadHeader>> &Read;
  };

  std::optional<std::vector<ReadHeader>> &Read;
};

/// Which dependency changed since Built was made, in words; empty when none did.
std::string changedDependency(const Preamble &Built, llvm::vfs::FileSystem &FS) {
  for (const PreambleDependency &Dependency : Built.Dependencies) {
    llvm::ErrorOr<llvm::vfs::Status> Status = FS.status(Dependency.Path);
    if (!Status) {
      return Dependency.Path + " is gone";
    }
    if (Status->getSize() != Dependency.Size) {
      return Dependency.Path + " changed";
    }
    auto Contents = FS.getBufferForFile(Dependency.Path, -1, /*RequiresNullTerminator=*/false,
                                        /*IsVolatile=*/true);
    if (!Contents || digestOf((*Contents)->getBuffer()) != Dependency.Digest) {
      return Dependency.Path + " changed";
    }
  }
  return "";
}

std::string manifestOf(const Preamble &Built, llvm::StringRef PchDigest) {
  std::string Text;
  llvm::raw_string_ostream Out(Text);
  Out << FormatVersion << "\nkey " << Built.Key << "\npch " << PchDigest << "\nbuilt-from "
      << Built.BuiltFrom << "\ntext " << Built.BuiltFromText.size() << "\n"
      << Built.BuiltFromText << "\n";
  for (const PreambleDependency &Dependency : Built.Dependencies) {
    Out << "dep " << Dependency.Digest << " " << Dependency.Size << " " << Dependency.Path << "\n";
  }
  return Text;
}

/// Reads an entry written by appendManifest; an error says what is wrong with it.
llvm::Expected<std::unique_ptr<Preamble>> parseEntry(std::unique_ptr<llvm::MemoryBuffer> Storage,
                                                     llvm::StringRef Key) {
  auto Corrupt = [](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "corrupt entry (" + Why + ")");
  };
  llvm::StringRef Data = Storage->getBuffer();
  if (Data.size() < TrailerSize || !Data.take_back(TrailerSize).starts_with(TrailerMagic)) {
    return Corrupt("no trailer");
  }
  const char *Trailer = Data.end() - TrailerSize + TrailerMagic.size();
  uint64_t PchSize = llvm::support::endian::read64le(Trailer);
  uint64_t ManifestSize = llvm::support::endian::read64le(Trailer + 8);
  if (PchSize + ManifestSize + TrailerSize != Data.size()) {
    return Corrupt("sizes do not add up");
  }
  auto Result = std::make_unique<Preamble>();
  Result->Pch = Data.take_front(PchSize);
  llvm::StringRef Manifest = Data.substr(PchSize, ManifestSize);
  auto Field = [&Manifest](llvm::StringRef Name) -> std::optional<llvm::StringRef> {
    auto [Line, Rest] = Manifest.split('\n');
    if (!Line.consume_front(Name) || !Line.consume_front(" ")) {
      return std::nullopt;
    }
    Manifest = Rest;
    return Line;
  };
  auto [Version, Rest] = Manifest.split('\n');
  Manifest = Rest;
  if (Version != FormatVersion) {
    return Corrupt("format " + Version);
  }
  std::optional<llvm::StringRef> EntryKey = Field("key");
  std::optional<llvm::StringRef> PchDigest = Field("pch");
  std::optional<llvm::StringRef> BuiltFrom = Field("built-from");
  std::optional<llvm::StringRef> TextSize = Field("text");
  size_t Size = 0;
  if (!EntryKey || !PchDigest || !BuiltFrom || !TextSize || TextSize->getAsInteger(10, Size) ||
      Manifest.size() < Size + 1) {
    return Corrupt("manifest");
  }
  if (*EntryKey != Key) {
    return Corrupt("key");
  }
  Result->Key = Key.str();
  Result->BuiltFrom = BuiltFrom->str();
  Result->BuiltFromText = Manifest.take_front(Size).str();
  Manifest = Manifest.drop_front(Size + 1);
  while (!Manifest.empty()) {
    std::optional<llvm::StringRef> Line = Field("dep");
    if (!Line) {
      return Corrupt("dependency list");
    }
    auto [Digest, SizeAndPath] = Line->split(' ');
    auto [DependencySize, Path] = SizeAndPath.split(' ');
    PreambleDependency Dependency{Path.str(), Digest.str(), 0};
    if (Path.empty() || DependencySize.getAsInteger(10, Dependency.Size)) {
      return Corrupt("dependency list");
    }
    Result->Dependencies.push_back(std::move(Dependency));
  }
  // Last, as it is the slow check: a PCH cut short or altered is never handed to clang.
  if (digestOf(Result->Pch) != *PchDigest) {
    return Corrupt("the precompiled header does not match its digest");
  }
  Result->Storage = std::move(Storage);
  return Result;
}

/// Appends the manifest and the trailer to the PCH at Path.
llvm::Error appendManifest(llvm::StringRef Path, llvm::StringRef Manifest, uint64_t PchSize) {
  std::error_code Error;
  llvm::raw_fd_ostream Out(Path, Error, llvm::sys::fs::OF_Append);
  if (Error) {
    return llvm::createStringError(Error, "cannot append to " + Path);
  }
  char Sizes[16];
  llvm::support::endian::write64le(Sizes, PchSize);
  llvm::support::endian::write64le(Sizes + 8, Manifest.size());
  Out << Manifest << TrailerMagic << llvm::StringRef(Sizes, sizeof(Sizes));
  Out.close();
  if (Out.has_error()) {
    Error = Out.error();
    Out.clear_error();
    return llvm::createStringError(Error, "cannot write " + Path);
  }
  return llvm::Error::success();
}

/// Marks an entry as used (removeOldEntries goes by the modification time).
void touch(llvm::StringRef Path) {
  int Fd = -1;
  if (!llvm::sys::fs::openFileForWrite(Path, Fd, llvm::sys::fs::CD_OpenExisting,
                                       llvm::sys::fs::OF_Append)) {
    llvm::sys::fs::setLastAccessAndModificationTime(Fd, std::chrono::system_clock::now());
    llvm::sys::Process::SafelyCloseFileDescriptor(Fd);
  }
}

std::string entryPath(llvm::StringRef Directory, llvm::StringRef Key) {
  llvm::SmallString<256> Path(Directory);
  llvm::sys::path::append(Path, Key + ".preamble");
  return std::string(Path);
}

} // namespace

PreambleCache::PreambleCache(std::string Directory, uint64_t SizeLimit)
    : Directory(std::move(Directory)), SizeLimit(SizeLimit) {}

std::string PreambleCache::defaultDirectory() {
  llvm::SmallString<256> Path;
  if (std::optional<std::string> Xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      Xdg && llvm::sys::path::is_absolute(*Xdg)) {
    Path = *Xdg;
  } else if (std::optional<std::string> Home = llvm::sys::Process::GetEnv("HOME");
             Home && !Home->empty()) {
    Path = *Home;
    llvm::sys::path::append(Path, ".cache");
  } else {
    return "";
  }
  llvm::sys::path::append(Path, "accel", "preambles");
  return std::string(Path);
}

std::shared_ptr<const Preamble>
PreambleCache::get(const clang::CompilerInvocation &Invocation, llvm::StringRef MainText,
                   clang::PreambleBounds Bounds, llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS,
                   std::shared_ptr<clang::PCHContainerOperations> Ops, PreambleSource &Source,
                   std::string &Note) {
  Source = PreambleSource::None;
  const clang::FrontendOptions &Frontend = Invocation.getFrontendOpts();
  if (Bounds.Size == 0 || Frontend.Inputs.size() != 1 || !Frontend.Inputs[0].isFile()) {
    Note = "no preamble";
    return nullptr;
  }
  if (!Invocation.getPreprocessorOpts().ImplicitPCHInclude.empty()) {
    Note = "not cached: the compile command includes its own precompiled header";
    return nullptr;
  }
  llvm::StringRef PreambleText = MainText.take_front(Bounds.Size);
  const std::string Directives = directiveTokens(PreambleText, Invocation.getLangOpts());
  if (Directives.empty()) {
    Note = "no preamble";
    return nullptr; // Comments only.
  }
  llvm::SmallString<256> MainFile(Frontend.Inputs[0].getFile());
  FS->makeAbsolute(MainFile);
  std::string Key = keyFor(Invocation, Directives, MainFile, *FS);

  Slot *Entry;
  {
    std::lock_guard<std::mutex> Lock(SlotsMutex);
    std::unique_ptr<Slot> &Found = Slots[Key];
    if (!Found) {
      Found = std::make_unique<Slot>();
    }
    Entry = Found.get();
  }
  std::lock_guard<std::mutex> Lock(Entry->Busy);
  std::string Stale;
  if (Entry->Loaded) {
    Stale = changedDependency(*Entry->Loaded, *FS);
    if (Stale.empty()) {
      Source = PreambleSource::Memory;
      Note = "preamble " + Key + " reused from memory";
      return Entry->Loaded;
    }
    Entry->Loaded.reset();
  } else if (!Directory.empty()) {
    std::string Path = entryPath(Directory, Key);
    auto Storage = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                               /*RequiresNullTerminator=*/false);
    if (Storage) {
      llvm::Expected<std::unique_ptr<Preamble>> Parsed = parseEntry(std::move(*Storage), Key);
      if (!Parsed) {
        Stale = llvm::toString(Parsed.takeError());
      } else if (Stale = changedDependency(**Parsed, *FS); Stale.empty()) {
        // Entries in use stay; the others are removed after a while (removeOldEntries).
        touch(Path);
        Entry->Loaded = std::move(*Parsed);
        Source = PreambleSource::Disk;
        Note = "preamble " + Key + " loaded from " + Directory;
        return Entry->Loaded;
      }
    }
  }
  Entry->Loaded = build(Invocation, Key, PreambleText, FS, std::move(Ops), Note);
  if (Entry->Loaded) {
    Source = PreambleSource::Built;
    if (!Stale.empty()) {
      Note += " (rebuilt: " + Stale + ")";
    }
  }
  return Entry->Loaded;
}

std::shared_ptr<const Preamble>
PreambleCache::build(const clang::CompilerInvocation &Invocation, llvm::StringRef Key,
                     llvm::StringRef PreambleText,
                     llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS,
                     std::shared_ptr<clang::PCHContainerOperations> Ops, std::string &Note) {
  auto Built = std::make_shared<Preamble>();
  Built->Key = Key.str();
  Built->BuiltFromText = PreambleText.str();
  // The PCH is built from a file of its own beside the main file (so that "x.h" resolves
  // the same), which any file with the same directives can then use.
  llvm::SmallString<256> MainFile(Invocation.getFrontendOpts().Inputs[0].getFile());
  FS->makeAbsolute(MainFile);
  llvm::SmallString<256> BuiltFrom(llvm::sys::path::parent_path(MainFile));
  llvm::sys::path::append(BuiltFrom, ".accel-preamble-" + Key + ".cpp");
  Built->BuiltFrom = std::string(BuiltFrom);

  // Where clang writes the PCH: a temporary file in the cache directory, renamed into
  // place once complete, so that no run ever reads a half-written entry.
  std::string Where = Directory;
  if (Where.empty()) {
    llvm::SmallString<256> Temporary;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, Temporary);
    Where = std::string(Temporary);
  } else if (std::error_code Error = llvm::sys::fs::create_directories(Where)) {
    Note = "not cached: cannot create " + Where + ": " + Error.message();
    return nullptr;
  }
  llvm::SmallString<256> PchPath;
  {
    int Fd = -1;
    llvm::SmallString<256> Model(Where);
    llvm::sys::path::append(Model, "tmp-" + Key + "-" + hostTag() + "-" +
                                       std::to_string(::getpid()) + "-%%%%%%%%.pch");
    if (std::error_code Error = llvm::sys::fs::createUniqueFile(Model, Fd, PchPath)) {
      Note = "not cached: cannot write in " + Where + ": " + Error.message();
      return nullptr;
    }
    llvm::sys::Process::SafelyCloseFileDescriptor(Fd);
  }
  // Gone on every way out: renamed into place, or abandoned.
  struct RemoveOnExit {
    llvm::SmallString<256> &Path;
    ~RemoveOnExit() { llvm::sys::fs::remove(Path); }
  } RemovePch{PchPath};

  auto PchInvocation = std::make_shared<clang::CompilerInvocation>(Invocation);
  clang::FrontendOptions &Frontend = PchInvocation->getFrontendOpts();
  Frontend.ProgramAction = clang::frontend::GeneratePCH;
  Frontend.OutputFile = std::string(PchPath);
  Frontend.Inputs = {
      clang::FrontendInputFile(Built->BuiltFrom, Invocation.getFrontendOpts().Inputs[0].getKind())};
  // As clangd does: the rules read the main file's code, so header function bodies (those
  // Sema can do without: not constexpr, no deduced return type) are skipped, which makes
  // the PCH smaller and faster to build and to load.
  Frontend.SkipFunctionBodies = true;
  Frontend.IncludeTimestamps = false; // The manifest's digests validate the headers.
  clang::PreprocessorOptions &Preprocessor = PchInvocation->getPreprocessorOpts();
  Preprocessor.GeneratePreamble = true; // Record a conditional left open by the preamble.
  Preprocessor.PrecompiledPreambleBytes = {0, false};
  Preprocessor.WriteCommentListToPCH = false;
  PchInvocation->getLangOpts().PCHInstantiateTemplates = true;
  PchInvocation->getDependencyOutputOpts() = clang::DependencyOutputOptions();

  auto Overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(FS);
  auto Memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  Memory->addFile(Built->BuiltFrom, 0, llvm::MemoryBuffer::getMemBufferCopy(PreambleText));
  Overlay->pushOverlay(Memory);
  if (llvm::ErrorOr<std::string> WorkingDir = FS->getCurrentWorkingDirectory()) {
    Overlay->setCurrentWorkingDirectory(*WorkingDir);
  }

  // Through tooling's runInvocation, as the parse itself: the API LLVM 19 to 22 share.
  std::optional<std::vector<ReadHeader>> Read;
  PchBuilder Builder(Read);
  auto Files =
      llvm::makeIntrusiveRefCnt<clang::FileManager>(PchInvocation->getFileSystemOpts(), Overlay);
  clang::DiagnosticConsumer Counter; // Counts; the parse without a preamble reports errors.
  if (!Builder.runInvocation(PchInvocation, Files.get(), std::move(Ops), &Counter) ||
      Counter.getNumErrors() != 0 || !Read) {
    Note = "not cached: the preamble does not compile on its own";
    return nullptr;
  }

  for (const ReadHeader &Header : *Read) {
    llvm::SmallString<256> Path(Header.Name);
    FS->makeAbsolute(Path);
    llvm::sys::path::remove_dots(Path, /*remove_dot_dot=*/false);
    if (Path == Built->BuiltFrom) {
      continue;
    }
    if (!Header.Readable || Path.str().contains('\n')) {
      Note = "not cached: cannot read " + std::string(Path) + " back";
      return nullptr;
    }
    Built->Dependencies.push_back({std::string(Path), Header.Digest, Header.Size});
  }

  // The PCH as clang wrote it, read once: the entry's digest is taken from these bytes, and
  // they are what this process then uses (the file on disk only ever grows past them), so
  // the entry just written needs no second reading and digest. Memory-only entries are
  // read into memory, as their file goes with RemovePch.
  auto Pch = llvm::MemoryBuffer::getFile(PchPath, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false,
                                         /*IsVolatile=*/Directory.empty());
  if (!Pch || (*Pch)->getBufferSize() == 0) {
    Note = "not cached: clang wrote no precompiled header";
    return nullptr;
  }
  Built->Storage = std::move(*Pch);
  Built->Pch = Built->Storage->getBuffer();
  if (Directory.empty()) {
    Note = "preamble " + Built->Key + " built (in memory)";
    return Built;
  }
  if (llvm::Error Error =
          appendManifest(PchPath, manifestOf(*Built, digestOf(Built->Pch)), Built->Pch.size())) {
    Note = "not cached: " + llvm::toString(std::move(Error));
    return nullptr;
  }
  std::string Final = entryPath(Directory, Key);
  if (std::error_code Error = llvm::sys::fs::rename(PchPath, Final)) {
    Note = "not cached: cannot rename into " + Final + ": " + Error.message();
    return nullptr;
  }
  removeOldEntries(Final);
  Note = "preamble " + Built->Key + " built into " + Directory;
  return Built;
}

void PreambleCache::removeOldEntries(llvm::StringRef Written) {
  struct Kept {
    std::string Path;
    uint64_t Size;
    std::chrono::system_clock::time_point LastUsed;
  };
  std::vector<Kept> Entries;
  uint64_t Total = 0;
  std::error_code Error;
  auto Now = std::chrono::system_clock::now();
  for (llvm::sys::fs::directory_iterator It(Directory, Error), End; It != End && !Error;
       It.increment(Error)) {
    llvm::StringRef Name = llvm::sys::path::filename(It->path());
    bool Entry = Name.ends_with(".preamble");
    // Ours ("tmp-KEY-HOST-PID-RANDOM.pch") and clang's own next to it when a build was
    // interrupted while it wrote the PCH (".pch.tmp", ".pch-RANDOM" after ours).
    bool Temporary = Name.starts_with("tmp-") && Name.contains(".pch");
    llvm::ErrorOr<llvm::sys::fs::basic_file_status> Status = It->status();
    if ((!Entry && !Temporary) || !Status) {
      continue;
    }
    auto LastUsed = Status->getLastModificationTime();
    auto Age = Now - LastUsed;
    if ((Entry && Age > UnusedEntryLifetime) ||
        (Temporary && (Age > AbandonedTemporaryAge || writtenByAGoneProcess(Name)))) {
      llvm::sys::fs::remove(It->path());
    } else if (Entry) {
      Total += Status->getSize();
      if (It->path() != Written) {
        Entries.push_back({It->path(), Status->getSize(), LastUsed});
      }
    }
  }
  // Over the limit: the least recently used go first (get touches an entry it loads), never
  // the one just written. Another run may still map a removed entry; its mapping stays valid.
  std::sort(Entries.begin(), Entries.end(),
            [](const Kept &A, const Kept &B) { return A.LastUsed < B.LastUsed; });
  for (const Kept &Entry : Entries) {
    if (Total <= SizeLimit) {
      break;
    }
    if (!llvm::sys::fs::remove(Entry.Path)) {
      Total -= Entry.Size;
    }
  }
}

llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>
PreambleCache::use(const Preamble &Built, clang::PreambleBounds Bounds,
                   clang::CompilerInvocation &Invocation,
                   llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS) {
  llvm::SmallString<256> PchPath(llvm::sys::path::parent_path(Built.BuiltFrom));
  llvm::sys::path::append(PchPath, ".accel-preamble-" + Built.Key + ".pch");
  auto Overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(FS);
  auto Memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  Memory->addFile(PchPath, 0,
                  llvm::MemoryBuffer::getMemBuffer(Built.Pch, PchPath,
                                                   /*RequiresNullTerminator=*/false));
  Memory->addFile(Built.BuiltFrom, 0, llvm::MemoryBuffer::getMemBuffer(Built.BuiltFromText));
  Overlay->pushOverlay(Memory);
  if (llvm::ErrorOr<std::string> WorkingDir = FS->getCurrentWorkingDirectory()) {
    Overlay->setCurrentWorkingDirectory(*WorkingDir);
  }
  clang::PreprocessorOptions &Preprocessor = Invocation.getPreprocessorOpts();
  Preprocessor.ImplicitPCHInclude = std::string(PchPath);
  Preprocessor.PrecompiledPreambleBytes = {Bounds.Size, Bounds.PreambleEndsAtStartOfLine};
  // The manifest's digests stand for clang's own size-and-time checks of the headers.
  Preprocessor.DisablePCHOrModuleValidation = clang::DisableValidationForModuleKind::PCH;
  Preprocessor.UsePredefines = false; // The PCH holds them.
  return Overlay;
}

} // namespace accel::tool
