// File: tests/base/unique_fd_test.cc
//
// UniqueFd closes what it owns exactly once: on destruction, on Reset, on
// Close (which reports close's error), never after a move or Release.
#include "base/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "gtest/gtest.h"

namespace base {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

int OpenDevNull() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(UniqueFdTest, ClosesOnDestruction) {
  int raw = -1;
  {
    UniqueFd fd(OpenDevNull());
    raw = fd.get();
    ASSERT_TRUE(fd.valid());
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, AFailedOpenOwnsNothing) {
  UniqueFd fd(::open("/no/such/file", O_RDONLY));
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(fd.get(), -1);
  EXPECT_TRUE(fd.Close("close nothing").ok());
}

TEST(UniqueFdTest, MoveTransfersOwnershipAndClosesOnce) {
  UniqueFd a(OpenDevNull());
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(b.get(), raw);
  EXPECT_TRUE(IsOpen(raw));

  // Move assignment closes what the target held before.
  UniqueFd c(OpenDevNull());
  const int replaced = c.get();
  c = std::move(b);
  EXPECT_FALSE(IsOpen(replaced));
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c = UniqueFd();
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, ReleaseGivesUpOwnershipAndResetCloses) {
  int raw = -1;
  {
    UniqueFd fd(OpenDevNull());
    raw = fd.Release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));  // released: the destructor left it alone
  UniqueFd owner(raw);
  owner.Reset(OpenDevNull());
  EXPECT_FALSE(IsOpen(raw));
  const int second = owner.get();
  owner.Reset();
  EXPECT_FALSE(IsOpen(second));
  EXPECT_FALSE(owner.valid());
}

TEST(UniqueFdTest, CloseReportsTheErrorAndReleasesEitherWay) {
  UniqueFd fd(OpenDevNull());
  const int raw = fd.get();
  EXPECT_TRUE(fd.Close("closing /dev/null").ok());
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(IsOpen(raw));

  // A descriptor closed behind its owner's back: close fails with EBADF, the
  // error carries the caller's words, and the owner holds nothing after.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ::close(pipe_fds[1]);
  UniqueFd stale(pipe_fds[0]);
  ASSERT_EQ(::close(pipe_fds[0]), 0);
  const absl::Status closed = stale.Close("closing the pipe");
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("closing the pipe"), absl::string_view::npos) << closed;
  EXPECT_FALSE(stale.valid());
}

}  // namespace
}  // namespace base
