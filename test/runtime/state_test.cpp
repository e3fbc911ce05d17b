// Who am I: the variables of each launcher the runtime supports, and bad values.
#include "accelerate/state.h"

#include <gtest/gtest.h>

#include <map>

namespace {

using accelerate::detect_process_info;
using accelerate::ProcessInfo;

ProcessInfo detect(const std::map<std::string, std::string> &variables) {
  return detect_process_info([&](const std::string &name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) {
      return std::nullopt;
    }
    return found->second;
  });
}

TEST(State, NoVariablesMeansOneProcess) {
  const auto info = detect({});
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_FALSE(info.distributed());
}

TEST(State, TorchrunAndAccelLaunch) {
  const auto info = detect({{"RANK", "3"},
                            {"WORLD_SIZE", "4"},
                            {"LOCAL_RANK", "1"},
                            {"LOCAL_WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "10.1.2.3"},
                            {"MASTER_PORT", "29555"}});
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "10.1.2.3");
  EXPECT_EQ(info.master_port, 29555);
  EXPECT_TRUE(info.distributed());
}

TEST(State, OpenMpi) {
  const auto info = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(info.launcher, "mpi");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
}

TEST(State, MpichPmi) {
  const auto info = detect({{"PMI_RANK", "2"},
                            {"PMI_SIZE", "3"},
                            {"MPI_LOCALRANKID", "0"},
                            {"MPI_LOCALNRANKS", "1"},
                            {"MASTER_ADDR", "head"}});
  EXPECT_EQ(info.launcher, "pmi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.master_addr, "head");
}

TEST(State, SlurmTakesTheFirstHostOfTheNodeList) {
  const auto info = detect({{"SLURM_PROCID", "5"},
                            {"SLURM_NTASKS", "8"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NTASKS_PER_NODE", "2(x4)"},
                            {"SLURM_JOB_NODELIST", "gpu[07-10],cpu1"}});
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "gpu07");
}

TEST(State, SlurmNodeLists) {
  using accelerate::first_host_of_slurm_nodelist;
  EXPECT_EQ(first_host_of_slurm_nodelist("node1"), "node1");
  EXPECT_EQ(first_host_of_slurm_nodelist("node1,node2"), "node1");
  EXPECT_EQ(first_host_of_slurm_nodelist("n[3,5-6]"), "n3");
  EXPECT_EQ(first_host_of_slurm_nodelist("rack1-n[012-015]-ib"), "rack1-n012");
  EXPECT_THROW(first_host_of_slurm_nodelist("n[3"), std::invalid_argument);
}

TEST(State, TorchrunVariablesWinOverTheScheduler) {
  // torchrun inside an srun allocation: its own variables describe the job.
  const auto info =
      detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.world_size, 2);
}

TEST(State, MalformedValuesNameTheVariable) {
  try {
    detect({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("RANK='one'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(detect({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), std::invalid_argument);
  EXPECT_THROW(detect({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), std::invalid_argument);
  EXPECT_THROW(detect({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), std::invalid_argument);
  EXPECT_THROW(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
               std::invalid_argument);
  EXPECT_THROW(
      detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}}),
      std::invalid_argument);
}

} // namespace
