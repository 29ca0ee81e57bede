// merge_rank_checkpoints on hand-built per-rank files (one process, no MPI): pieces cut by a
// layout, ZeRO-1 state ranges over each piece's replicas, a pipeline whose stages are cut over
// their ranks; and the errors for an incomplete or inconsistent set. The CLI runs that write real
// per-rank sets are in launch_test.cpp (Launch.PipelineStagesCutOverTheirRanksMatchOneProcess).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "spore/parallel/rank_checkpoint.h"
#include "spore/parallel/sharding.h"
#include "spore/spore.h"

using namespace spore;
using parallel::Layout;

namespace {

// Rank g's piece of `whole` under layout l.
Tensor piece(const Tensor& whole, const Layout& l, int g) {
  Tensor t = whole;
  for (size_t d = 0; d < l.dims.size(); ++d) {
    const int64_t n = whole.shape()[d] / l.dims[d].parts, i = l.piece(d, g);
    t = t.slice(int64_t(d), i * n, (i + 1) * n);
  }
  return t.contiguous();
}

void expect_equal(const Tensor& a, const Tensor& b, const std::string& name) {
  ASSERT_EQ(a.shape(), b.shape()) << name;
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << name;
}

std::string merge_error(const std::vector<io::Checkpoint>& cks) {
  try {
    parallel::merge_rank_checkpoints(cks);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// dp 2 x mp 2 on 4 ranks with ZeRO-1, as ModelCheckpoint writes it: fc.weight (4, 6) and fc.bias
// cut in 2 over the mp digit (stride 1), ln.gamma whole; the optimizer knows them as param0..2
// (an optimizer built from unnamed parameters), which "param.<name>" maps to the tensors. The
// optimizer flattens each replica group's pieces together: fc.weight's piece (12) then fc.bias's
// (2), 7 per rank of the pair {g, g + 2}; ln.gamma (6) over all 4 ranks, 2 each (rank 3: none).
struct Mesh {
  std::map<std::string, Tensor> whole;
  std::vector<io::Checkpoint> ranks;
};

Mesh dp_mp_zero() {
  Mesh m;
  m.whole["fc.weight"] = arange(24).reshape({4, 6});
  m.whole["fc.bias"] = arange(100, 104);
  m.whole["ln.gamma"] = arange(200, 206);
  m.whole["moments.param0"] = m.whole["fc.weight"] * 0.5f;
  m.whole["moments.param1"] = m.whole["fc.bias"] * 0.5f;
  m.whole["moments.param2"] = m.whole["ln.gamma"] * 0.5f;
  const Layout w = Layout::parse("[2@1, 1]"), b = Layout::parse("[2@1]");
  for (int g = 0; g < 4; ++g) {
    io::Checkpoint ck;
    ck.metadata = {{"rank", std::to_string(g)},
                   {"group_size", "4"},
                   {"global_step", "8"},
                   {"epoch", "1"},
                   {"step", "8"},
                   {"lr", "0.01"},
                   {"optimizer", "Momentum"},
                   {"layout.fc.weight", w.str()},
                   {"layout.fc.bias", b.str()},
                   {"param.param0", "fc.weight"},
                   {"param.param1", "fc.bias"},
                   {"param.param2", "ln.gamma"}};
    const Tensor pw = piece(m.whole["fc.weight"], w, g), pb = piece(m.whole["fc.bias"], b, g);
    ck.tensors = {{"fc.weight", pw}, {"fc.bias", pb}, {"ln.gamma", m.whole["ln.gamma"]}};
    const Tensor mw = piece(m.whole["moments.param0"], w, g).reshape({-1}),
                 mb = piece(m.whole["moments.param1"], b, g).reshape({-1});
    if (g < 2) {  // first of its pair: flat [0, 7) = fc.weight [0, 7)
      ck.tensors.emplace_back("moments.param0", mw.slice(0, 0, 7).contiguous());
      ck.metadata["shard.param0"] = "0:7";
    } else {  // flat [7, 14) = fc.weight [7, 12) and fc.bias [0, 2)
      ck.tensors.emplace_back("moments.param0", mw.slice(0, 7, 12).contiguous());
      ck.tensors.emplace_back("moments.param1", mb.contiguous());
      ck.metadata["shard.param0"] = "7:12";
      ck.metadata["shard.param1"] = "0:2";
    }
    if (g < 3) {
      ck.tensors.emplace_back("moments.param2",
                              m.whole["moments.param2"].slice(0, 2 * g, 2 * g + 2).contiguous());
      ck.metadata["shard.param2"] = std::to_string(2 * g) + ":" + std::to_string(2 * g + 2);
    }
    ck.metadata["optimizer_shard"] =
        "0:7/2," + std::to_string(2 * g) + ":" + std::to_string(std::min(6, 2 * g + 2)) + "/4";
    m.ranks.push_back(std::move(ck));
  }
  return m;
}

}  // namespace

TEST(RankCheckpoint, LayoutTextRoundTrips) {
  for (const char* s : {"[4@2, 1, 2@1]", "[1]", "[2@1, 1]", "[]"})
    EXPECT_EQ(Layout::parse(s).str(), s);
  const Layout l = Layout::parse("[4@2, 1, 2@1]");
  EXPECT_EQ(l.piece(0, 5), 2);  // (5 / 2) % 4
  EXPECT_EQ(l.piece(2, 5), 1);
  for (const char* bad : {"4@2", "[x]", "[0]", "[2@]", "[2@-1]", "[2@1,, 1]"}) {
    try {
      Layout::parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("pieces@rank stride"), std::string::npos) << e.what();
    }
  }
}

TEST(RankCheckpoint, PiecesAndZeroRangesMergeIntoTheWholeTensors) {
  Mesh m = dp_mp_zero();
  std::swap(m.ranks[0], m.ranks[3]);  // any order
  const io::Checkpoint out = parallel::merge_rank_checkpoints(m.ranks);
  EXPECT_EQ(out.tensors.size(), m.whole.size());
  for (const auto& [name, t] : m.whole) {
    const Tensor* got = out.find(name);
    ASSERT_NE(got, nullptr) << name;
    expect_equal(*got, t, name);
  }
  // The run's metadata is kept; what belonged to one rank is not.
  EXPECT_EQ(out.metadata.at("global_step"), "8");
  EXPECT_EQ(out.metadata.at("lr"), "0.01");
  for (const auto& [k, v] : out.metadata)
    EXPECT_TRUE(k != "rank" && k != "group_size" && k != "optimizer_shard" &&
                k.rfind("layout.", 0) != 0 && k.rfind("shard.", 0) != 0)
        << k;
}

// Two pipeline stages, each cut over its 2 ranks (pp 2 x mp 2 on 4 ranks): world rank r runs
// stage r % 2 as the stage's rank r / 2, so a layout's rank is r / 2. Each cut parameter keeps its
// whole-piece state (no ZeRO-1).
TEST(RankCheckpoint, StagesCutOverTheirRanksMergeInStageOrder) {
  const Tensor a = arange(8).reshape({2, 4}), b = arange(50, 56).reshape({3, 2});
  const Layout la = Layout::parse("[1, 2@1]"), lb = Layout::parse("[1, 2@1]");
  std::vector<io::Checkpoint> ranks;
  for (int r = 0; r < 4; ++r) {
    const int s = r % 2, g = r / 2;
    io::Checkpoint ck;
    ck.metadata = {{"rank", std::to_string(r)},
                   {"group_size", "4"},
                   {"global_step", "3"},
                   {"pipeline_stage", std::to_string(s)},
                   {"pipeline_stages", "2"}};
    const std::string p = s == 0 ? "stage0.w" : "stage1.w";
    const Tensor& whole = s == 0 ? a : b;
    const Layout& l = s == 0 ? la : lb;
    ck.metadata["layout." + p] = l.str();
    ck.tensors = {{p, piece(whole, l, g)}, {"moments." + p, piece(whole, l, g) * 2.0f}};
    ranks.push_back(std::move(ck));
  }
  const io::Checkpoint out = parallel::merge_rank_checkpoints(ranks);
  ASSERT_EQ(out.tensors.size(), 4u);
  EXPECT_EQ(out.tensors[0].first, "stage0.w");  // stage 0's tensors first
  expect_equal(*out.find("stage0.w"), a, "stage0.w");
  expect_equal(*out.find("moments.stage0.w"), a * 2.0f, "moments.stage0.w");
  expect_equal(*out.find("stage1.w"), b, "stage1.w");
  expect_equal(*out.find("moments.stage1.w"), b * 2.0f, "moments.stage1.w");
  // Still a merged pipeline checkpoint: it says which stage holds each tensor.
  EXPECT_EQ(out.metadata.at("pipeline_stages"), "2");
  EXPECT_EQ(out.metadata.at("pipeline_stage.stage1.w"), "1");
}

TEST(RankCheckpoint, IncompleteOrInconsistentSetsAreRefusedByName) {
  {
    Mesh m = dp_mp_zero();
    m.ranks.pop_back();
    EXPECT_NE(merge_error(m.ranks).find("no file of rank 3"), std::string::npos)
        << merge_error(m.ranks);
  }
  {
    Mesh m = dp_mp_zero();
    m.ranks[1] = m.ranks[0];
    EXPECT_NE(merge_error(m.ranks).find("rank 0 is given twice"), std::string::npos);
  }
  {
    Mesh m = dp_mp_zero();
    m.ranks[2].metadata["global_step"] = "9";
    const std::string e = merge_error(m.ranks);
    EXPECT_NE(e.find("global_step 9"), std::string::npos) << e;
    EXPECT_NE(e.find("same step"), std::string::npos) << e;
  }
  {
    Mesh m = dp_mp_zero();
    m.ranks[2].metadata["shard.param0"] = "6:12";  // a range its values do not fill
    EXPECT_NE(merge_error(m.ranks).find("damaged"), std::string::npos) << merge_error(m.ranks);
  }
  {
    Mesh m = dp_mp_zero();  // rank 1's ln.gamma part lost: elements 2..3 held by nobody
    auto& t = m.ranks[1].tensors;
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const auto& nt) { return nt.first == "moments.param2"; }),
            t.end());
    const std::string e = merge_error(m.ranks);
    EXPECT_NE(e.find("moments.param2"), std::string::npos) << e;
    EXPECT_NE(e.find("no rank holding its elements from 2"), std::string::npos) << e;
  }
  {
    Mesh m = dp_mp_zero();
    m.ranks[3].metadata["layout.fc.weight"] = "[2@2, 1]";
    const std::string e = merge_error(m.ranks);
    EXPECT_NE(e.find("not one run's"), std::string::npos) << e;
  }
  {
    Mesh m = dp_mp_zero();  // files from before "param.<name>" was recorded
    for (io::Checkpoint& ck : m.ranks)
      for (const char* k : {"param.param0", "param.param1", "param.param2"}) ck.metadata.erase(k);
    const std::string e = merge_error(m.ranks);
    EXPECT_NE(e.find("no param.<name> metadata"), std::string::npos) << e;
  }
}
