// File: tests/integration/train/train_llama_test.cc
//
// train_gpt --model=llama over real processes on loopback (the launcher and
// the UCX communicator), as train_gpt_sharding_test runs the GPT:
//   * at 2 ranks, shard_optimizer, shard_grad_op, full_shard and
//     hybrid_shard (group 1) end with no_shard's parameter SHA-256 and losses,
//     bit for bit, in fp32 and in bf16 with flash attention and every block
//     checkpointed; a global batch of 12 sequences of a Llama with
//     grouped-query attention whose units do not divide by 2 (vocab 37);
//   * at 2 ranks full_shard on the fortunes tokens, the training loss falls
//     below the corpus's unigram entropy (computed here from the token file);
//   * validation and samples agree between no_shard and full_shard, and
//     generate repeats the sample from the export and from the checkpoint;
//   * --exact gives one digest at 1, 2 and 4 ranks, any split and strategy;
//   * bad Llama flags are refused before any rank starts, naming the flag.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 5;

std::vector<std::string> ModelFlags() {
  return {"--model=llama",  "--layers=2",   "--d_model=24",       "--heads=4",
          "--kv_heads=2",   "--ffn_hidden=40", "--rope_theta=500000", "--vocab=37",
          "--seq_len=12",   "--global_batch=12", "--steps=5",      "--warmup_steps=1",
          "--lr=0.01",      "--min_lr=0.001", "--threads=1",       "--seed=11",
          "--nproc=2",      "--grad_clip=0.5"};
}

TrainGptRun RunJob(const std::string& name, const std::vector<std::string>& extra) {
  return RunTrainGptJob(name, ModelFlags(), extra, kSteps);
}

const char* const kShardedStrategies[] = {"shard_optimizer", "shard_grad_op", "full_shard",
                                          "hybrid_shard"};

void ExpectEveryStrategyMatchesNoShard(const std::string& mode, std::vector<std::string> extra) {
  std::vector<std::string> no_shard_flags = extra;
  no_shard_flags.push_back("--strategy=no_shard");
  const TrainGptRun no_shard = RunJob(mode + "_no_shard", no_shard_flags);
  EXPECT_LT(no_shard.losses.back(), no_shard.losses.front()) << no_shard.output;
  for (const char* strategy : kShardedStrategies) {
    std::vector<std::string> flags = extra;
    flags.push_back(absl::StrCat("--strategy=", strategy));
    if (std::string(strategy) == "hybrid_shard") flags.push_back("--group_size=1");
    const TrainGptRun run = RunJob(absl::StrCat(mode, "_", strategy), flags);
    EXPECT_EQ(run.param_sha256, no_shard.param_sha256) << mode << " " << strategy;
    EXPECT_EQ(run.losses, no_shard.losses) << mode << " " << strategy;
  }
}

TEST(TrainLlamaTest, EveryStrategyMatchesNoShardBitForBitAtTwoRanks) {
  ExpectEveryStrategyMatchesNoShard("fp32", {});
}

// The head tied to the embedding: the model keeps the embedding's weight
// from unit 0's forward for the head, and adds the head's gradient of it in
// unit 0's backward, the same way under every strategy.
TEST(TrainLlamaTest, TiedEmbeddingsEveryStrategyMatchesNoShard) {
  ExpectEveryStrategyMatchesNoShard("tied", {"--tie_embeddings"});
  ExpectEveryStrategyMatchesNoShard(
      "tied_bf16", {"--tie_embeddings", "--precision=bf16", "--activation_checkpointing=all"});
}

// --exact (docs/exact.md): the Llama's products one sequence at a time and
// its gradients exact int64 sums of per-sequence contributions, so one
// digest and one loss curve at every world size, micro-batch x accumulation
// split and strategy, in fp32 and in bf16.
TEST(TrainLlamaTest, ExactModeGivesOneDigestForEveryWorldSizeAndSplit) {
  struct Split {
    int nproc, micro_batch, accum;
    const char* strategy;
  };
  const Split splits[] = {{1, 8, 1, "no_shard"},     {2, 4, 1, "no_shard"},
                          {2, 2, 2, "full_shard"},   {4, 1, 2, "shard_grad_op"},
                          {4, 2, 1, "hybrid_shard"}, {1, 1, 8, "no_shard"}};
  for (const char* precision : {"fp32", "bf16"}) {
    TrainGptRun first;
    for (const Split& s : splits) {
      std::vector<std::string> flags = {"--model=llama",
                                        "--layers=2",
                                        "--d_model=24",
                                        "--heads=4",
                                        "--kv_heads=2",
                                        "--ffn_hidden=40",
                                        "--vocab=37",
                                        "--seq_len=12",
                                        "--steps=4",
                                        "--warmup_steps=1",
                                        "--exact",
                                        "--threads=1",
                                        "--seed=3",
                                        std::string("--precision=") + precision,
                                        absl::StrCat("--nproc=", s.nproc),
                                        absl::StrCat("--micro_batch=", s.micro_batch),
                                        absl::StrCat("--accum=", s.accum),
                                        std::string("--strategy=") + s.strategy};
      if (std::string(s.strategy) == "hybrid_shard") flags.push_back("--group_size=2");
      const std::string name = absl::StrCat("exact_", precision, "_", s.nproc, "x", s.micro_batch,
                                            "x", s.accum, "_", s.strategy);
      const TrainGptRun run = RunTrainGptJob(name, flags, {}, 4);
      if (first.param_sha256.empty()) {
        first = run;
        continue;
      }
      EXPECT_EQ(run.param_sha256, first.param_sha256) << name;
      EXPECT_EQ(run.losses, first.losses) << name;
    }
  }
  // val_loss too: the forward-only Llama computes per sequence under --exact.
  const std::string prefix = TokenizedFortunes(300);
  std::vector<double> val;
  for (const Split& s : {Split{1, 4, 1, "no_shard"}, Split{2, 2, 1, "full_shard"},
                         Split{2, 1, 2, "shard_grad_op"}}) {
    const std::vector<std::string> flags = {
        "--model=llama", "--layers=2", "--d_model=32", "--heads=4", "--kv_heads=2",
        "--vocab=300", "--seq_len=32", "--steps=4", "--warmup_steps=1", "--exact",
        "--threads=1", "--data=" + prefix + "_train.bin", "--val_data=" + prefix + "_val.bin",
        "--val_every=2", "--val_batches=2", absl::StrCat("--nproc=", s.nproc),
        absl::StrCat("--micro_batch=", s.micro_batch), absl::StrCat("--accum=", s.accum),
        std::string("--strategy=") + s.strategy};
    const TrainGptRun run =
        RunTrainGptJob(absl::StrCat("exact_val_", s.nproc, "_", s.strategy), flags, {}, 4);
    ASSERT_EQ(run.val_losses.size(), 3u) << run.output;  // steps 0, 2, 4
    if (val.empty()) {
      val = run.val_losses;
    } else {
      EXPECT_EQ(run.val_losses, val) << s.nproc << " " << s.strategy;
    }
  }
}

TEST(TrainLlamaTest, Bf16FlashCheckpointedStrategiesMatchBitForBit) {
  ExpectEveryStrategyMatchesNoShard(
      "bf16", {"--precision=bf16", "--attention=flash", "--activation_checkpointing=all"});
}

// -sum p ln p over the tokens of an llm.c token file (a 256-int32 header
// whose third entry counts the uint16 tokens after it).
double UnigramEntropy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<int32_t> header(256);
  in.read(reinterpret_cast<char*>(header.data()), 1024);
  std::vector<uint16_t> tokens(header[2]);
  in.read(reinterpret_cast<char*>(tokens.data()), 2 * tokens.size());
  EXPECT_TRUE(in.good()) << path;
  std::map<uint16_t, int64_t> counts;
  for (uint16_t t : tokens) ++counts[t];
  double entropy = 0;
  for (const auto& [token, count] : counts) {
    const double p = static_cast<double>(count) / tokens.size();
    entropy -= p * std::log(p);
  }
  return entropy;
}

TEST(TrainLlamaTest, LearnsTheFortunesBelowTheirUnigramEntropyAtTwoRanksFullShard) {
  const std::string prefix = TokenizedFortunes(300);
  const double unigram = UnigramEntropy(prefix + "_train.bin");
  ASSERT_GT(unigram, 3.0);
  const TrainGptRun run = RunTrainGpt(
      "fortunes", {"--model=llama", "--nproc=2", "--strategy=full_shard",
                   "--data=" + prefix + "_train.bin", "--vocab=300", "--layers=2",
                   "--d_model=64", "--heads=4", "--kv_heads=2", "--seq_len=64",
                   "--micro_batch=4", "--steps=60", "--warmup_steps=5", "--lr=0.003",
                   "--threads=1"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), 60u) << run.output;
  double last = 0;
  for (int s = 50; s < 60; ++s) last += run.losses[s] / 10;
  EXPECT_LT(last, unigram - 0.2) << "mean loss of the last 10 steps against the unigram entropy "
                                 << unigram << "\n" << run.output;
}

// Validation and samples run the Llama's forward alone (fsdp/nn/llama_inference.h)
// over each unit gathered whole: no_shard and full_shard give the same
// val_loss and the same sample, and //examples:generate prints that sample
// again from the run's export and from its sharded checkpoint.
TEST(TrainLlamaTest, ValidatesSamplesAndGenerateRepeatsTheSample) {
  const std::string prefix = TokenizedFortunes(300);
  const std::string tmp = std::getenv("TEST_TMPDIR");
  auto run = [&](const std::string& name, const std::string& strategy,
                 std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--model=llama",
                                      "--nproc=2",
                                      "--strategy=" + strategy,
                                      "--data=" + prefix + "_train.bin",
                                      "--val_data=" + prefix + "_val.bin",
                                      "--vocab=300",
                                      "--layers=2",
                                      "--d_model=32",
                                      "--heads=4",
                                      "--kv_heads=2",
                                      "--rope_theta=500000",
                                      "--seq_len=32",
                                      "--micro_batch=4",
                                      "--steps=6",
                                      "--warmup_steps=2",
                                      "--val_every=3",
                                      "--val_batches=2",
                                      "--sample_tokens=30",
                                      "--sample_every=3",
                                      "--sample_seed=5",
                                      "--prompt=The ",
                                      "--threads=1"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    const TrainGptRun result = RunTrainGpt(name, flags);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result;
  };
  const std::string exported = tmp + "/llama_text.safetensors";
  const std::string checkpoints = tmp + "/llama_text_checkpoints";
  const TrainGptRun sharded = run("llama_text_full_shard", "full_shard",
                                  {"--export=" + exported, "--checkpoint_dir=" + checkpoints});
  const TrainGptRun replicated = run("llama_text_no_shard", "no_shard", {});
  ASSERT_EQ(sharded.val_losses.size(), 3u) << sharded.output;  // steps 0, 3, 6
  // Untrained, about ln(vocab); training lowers it.
  EXPECT_NEAR(sharded.val_losses[0], std::log(300.0), 0.2);
  EXPECT_LT(sharded.val_losses[2], sharded.val_losses[0]);
  ASSERT_EQ(replicated.val_losses.size(), 3u) << replicated.output;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(replicated.val_losses[i], sharded.val_losses[i], 1e-6 * sharded.val_losses[i]);
  }
  EXPECT_NE(sharded.output.find("---- sample after step 3 ("), std::string::npos) << sharded.output;
  const std::string sample = SampleText(sharded.output);
  EXPECT_EQ(sample.rfind("The ", 0), 0u) << sample;  // continues the prompt
  EXPECT_GT(sample.size(), 30u);
  EXPECT_EQ(SampleText(replicated.output), sample);

  const std::string tail =
      absl::StrCat(" --tokenizer=", prefix, ".tokenizer --tokens=30 --seed=5 --prompt='The '");
  std::string output;
  ASSERT_EQ(RunCommand(ExamplePath("generate") + " --safetensors=" + exported + tail, &output), 0)
      << output;
  EXPECT_EQ(output, sample);
  ASSERT_EQ(RunCommand(absl::StrCat(ExamplePath("generate"), " --checkpoint=", checkpoints,
                                    "/step-00000006", tail),
                       &output),
            0)
      << output;
  EXPECT_EQ(output, sample);
}

// --export writes Hugging Face's layout: LlamaForCausalLM's tensor names
// and a config.json in LlamaConfig's keys beside the file; --init_from reads
// both back (the same digest) and refuses a config.json that contradicts
// the flags, naming the key, its value and the flag.
TEST(TrainLlamaTest, ExportAndImportInHuggingFacesLayout) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/hf";
  std::string mkdir_output;
  ASSERT_EQ(RunCommand("mkdir -p " + dir, &mkdir_output), 0) << mkdir_output;
  const std::string file = dir + "/model.safetensors";
  const std::vector<std::string> shape = {"--model=llama", "--kv_heads=2", "--rope_theta=500000",
                                          "--warmup_steps=1", "--threads=1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> flags = shape;
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  };
  const TrainGptRun trained =
      RunTrainGpt("export", with({"--nproc=2", "--strategy=full_shard", "--steps=2",
                                  "--export=" + file}));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string config = ReadWholeFile(dir + "/config.json");
  for (const char* key : {"\"architectures\": [\n    \"LlamaForCausalLM\"",
                          "\"num_key_value_heads\": 2", "\"rope_theta\": 500000.0",
                          "\"rms_norm_eps\": 1e-05", "\"intermediate_size\": 256",
                          "\"tie_word_embeddings\": false"}) {
    EXPECT_NE(config.find(key), std::string::npos) << key << " in\n" << config;
  }
  const std::string header = ReadWholeFile(file).substr(0, 4096);
  EXPECT_NE(header.find("model.layers.1.self_attn.k_proj.weight"), std::string::npos);
  EXPECT_NE(header.find("lm_head.weight"), std::string::npos);

  const TrainGptRun loaded =
      RunTrainGpt("import", with({"--nproc=1", "--steps=0", "--init_from=" + file}));
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(loaded.param_sha256, trained.param_sha256);

  const TrainGptRun contradicted = RunTrainGpt(
      "contradicted", {"--model=llama", "--kv_heads=1", "--rope_theta=500000", "--nproc=1",
                       "--steps=0", "--init_from=" + file});
  EXPECT_EQ(contradicted.exit_code, 2) << contradicted.output;
  EXPECT_NE(contradicted.output.find("num_key_value_heads is 2 but --kv_heads=1"),
            std::string::npos)
      << contradicted.output;

  // Tied: no lm_head.weight in the file, tie_word_embeddings true beside it.
  const std::string tied_dir = dir + "/tied";
  ASSERT_EQ(RunCommand("mkdir -p " + tied_dir, &mkdir_output), 0) << mkdir_output;
  const std::string tied_file = tied_dir + "/model.safetensors";
  const TrainGptRun tied =
      RunTrainGpt("export_tied", with({"--tie_embeddings", "--nproc=2", "--strategy=full_shard",
                                       "--steps=2", "--export=" + tied_file}));
  ASSERT_EQ(tied.exit_code, 0) << tied.output;
  EXPECT_NE(ReadWholeFile(tied_dir + "/config.json").find("\"tie_word_embeddings\": true"),
            std::string::npos);
  const std::string tied_header = ReadWholeFile(tied_file).substr(0, 4096);
  EXPECT_NE(tied_header.find("model.embed_tokens.weight"), std::string::npos);
  EXPECT_EQ(tied_header.find("lm_head.weight"), std::string::npos) << tied_header;
  const TrainGptRun tied_loaded =
      RunTrainGpt("import_tied",
                  with({"--tie_embeddings", "--nproc=1", "--steps=0", "--init_from=" + tied_file}));
  ASSERT_EQ(tied_loaded.exit_code, 0) << tied_loaded.output;
  EXPECT_EQ(tied_loaded.param_sha256, tied.param_sha256);
  const TrainGptRun untie =
      RunTrainGpt("import_untied", with({"--nproc=1", "--steps=0", "--init_from=" + tied_file}));
  EXPECT_EQ(untie.exit_code, 2) << untie.output;
  EXPECT_NE(untie.output.find("tie_word_embeddings is true but --tie_embeddings=false"),
            std::string::npos)
      << untie.output;
}

TEST(TrainLlamaTest, BadFlagsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const Case cases[] = {
      {{"--model=llama", "--heads=4", "--kv_heads=3"}, "kv_heads (3) must divide heads (4)"},
      {{"--model=llama", "--ffn_multiple_of=0"}, "--ffn_multiple_of=0 must be positive"},
      {{"--model=llama", "--tie_embeddings", "--exact", "--threads=1"},
       "exact gradients (per-sequence products, --exact) with tied embeddings are not supported"},
      {{"--model=llama", "--d_model=24", "--heads=8"}, "even head size"},
      {{"--model=gpt", "--kv_heads=2"}, "shape a Llama (--model=llama)"},
      {{"--model=mamba"}, "no model named 'mamba'"},
  };
  for (const Case& c : cases) {
    const TrainGptRun run = RunTrainGpt("bad", c.flags);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("[rank"), std::string::npos) << "a rank started:\n" << run.output;
  }
}

}  // namespace
}  // namespace fsdp_test
