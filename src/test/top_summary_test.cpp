#include "top/top_summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// A summary in its own memory, as shared memory would hold it.
class Summary {
public:
    explicit Summary(std::uint32_t capacity)
        : memory_(top_summary_size(capacity) / sizeof(std::uint64_t) + 1)
    {
        top_init(get(), capacity);
    }

    TopSummary *get() { return reinterpret_cast<TopSummary *>(memory_.data()); }
    const TopSummary &operator*() { return *get(); }

private:
    std::vector<std::uint64_t> memory_;
};

std::string key_of(int subject)
{
    return "subject-" + std::to_string(subject);
}

// A seeded stream of `n` draws of `subjects` subjects, subject i drawn with
// weight 1 / (i + 1): Zipf's law with exponent 1.
std::vector<int> zipf_stream(int subjects, int n, unsigned seed)
{
    std::vector<double> weights;

    for (int i = 0; i < subjects; i++) {
        weights.push_back(1.0 / (i + 1));
    }

    std::mt19937 random(seed);
    std::discrete_distribution<int> draw(weights.begin(), weights.end());
    std::vector<int> stream;

    for (int i = 0; i < n; i++) {
        stream.push_back(draw(random));
    }

    return stream;
}

TEST(TopSummary, ExactWhileSubjectsFit)
{
    Summary summary(8);
    std::map<std::string, std::uint64_t> truth;

    for (int i = 0; i < 100; i++) {
        std::string key = key_of(i % 8);
        top_count(summary.get(), key, 1 + i % 3);
        truth[key] += 1 + i % 3;
    }

    EXPECT_EQ(top_error(*summary), 0u);
    EXPECT_EQ((*summary).total, 199u);

    for (const auto &[key, count] : truth) {
        EXPECT_EQ(top_estimate(*summary, key), count) << key;
    }

    EXPECT_EQ(top_estimate(*summary, key_of(8)), 0u);
}

// Every subject's estimate within top_error() of its true count, that
// error at most n / capacity, and the heaviest subjects found.
TEST(TopSummary, BoundHoldsOnZipfStream)
{
    for (unsigned seed : {1u, 2u, 3u}) {
        Summary summary(32);
        std::map<int, std::uint64_t> truth;
        std::vector<int> stream = zipf_stream(2000, 50000, seed);

        for (int subject : stream) {
            top_count(summary.get(), key_of(subject));
            truth[subject]++;
        }

        std::uint64_t error = top_error(*summary);
        EXPECT_GT(error, 0u) << "more subjects than counters";
        EXPECT_LE(error, stream.size() / 32);
        EXPECT_EQ((*summary).total, stream.size());

        for (const auto &[subject, count] : truth) {
            std::uint64_t estimate = top_estimate(*summary, key_of(subject));
            EXPECT_LE(estimate, count + error) << subject;
            EXPECT_GE(estimate + error, count) << subject;
        }

        // A subject whose count is above the error has a counter.
        for (int subject = 0; subject < 5; subject++) {
            EXPECT_GT(top_estimate(*summary, key_of(subject)), 0u)
                << "seed " << seed << " subject " << subject;
        }
    }
}

// Two servers' summaries summed per key: every sum within the sum of their
// errors of the true count over both streams, as the read sums the fleet's
// slices in Redis.
TEST(TopSummary, MergedBoundIsTheSumOfErrors)
{
    Summary a(16), b(16);
    std::map<int, std::uint64_t> truth;
    std::vector<int> one = zipf_stream(500, 20000, 7);
    std::vector<int> two = zipf_stream(500, 20000, 8);

    for (int subject : one) {
        top_count(a.get(), key_of(subject));
        truth[subject]++;
    }

    for (int subject : two) {
        // The other server sees the subjects in another order of weight.
        top_count(b.get(), key_of((subject * 7) % 500));
        truth[(subject * 7) % 500]++;
    }

    std::uint64_t bound = top_error(*a) + top_error(*b);

    for (const auto &[subject, count] : truth) {
        std::uint64_t sum = top_estimate(*a, key_of(subject))
                            + top_estimate(*b, key_of(subject));
        EXPECT_LE(sum, count + bound) << subject;
        EXPECT_GE(sum + bound, count) << subject;
    }
}

TEST(TopKey, ShortKeptLongCutAndMarked)
{
    char out[kTopKeyBytes];
    std::string exact(kTopKeyBytes, 'a');

    EXPECT_EQ(std::string(out, write_top_key("k1", out)), "k1");
    EXPECT_EQ(std::string(out, write_top_key(exact, out)), exact);

    std::string one = exact + "x", two = exact + "y";
    std::string cut_one(out, write_top_key(one, out));
    std::string cut_two(out, write_top_key(two, out));

    EXPECT_EQ(cut_one.size(), kTopKeyBytes);
    EXPECT_EQ(cut_one.substr(0, kTopKeyBytes - 20),
              std::string(kTopKeyBytes - 20, 'a'));
    EXPECT_EQ(cut_one.substr(kTopKeyBytes - 20, 4), "...#");
    EXPECT_NE(cut_one, cut_two);

    // The same subject, the same stored form: servers' counts meet.
    EXPECT_EQ(std::string(out, write_top_key(one, out)), cut_one);
}

TEST(TopKey, HashIsFnv1a)
{
    EXPECT_EQ(top_key_hash(""), 0xcbf29ce484222325ULL);
    EXPECT_EQ(top_key_hash("a"), 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace ratelimit
