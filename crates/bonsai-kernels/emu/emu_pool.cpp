// The emulator's thread pool (see emu_pool.h).
#include "emu_pool.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace emu {

namespace {

constexpr unsigned kMaxDefaultThreads = 8;

unsigned thread_count() {
    const char* env = std::getenv("BONSAI_EMU_THREADS");
    if (env && std::atoi(env) > 0) return (unsigned)std::atoi(env);
    const unsigned cpus = std::thread::hardware_concurrency();
    return cpus == 0 ? 1 : (cpus < kMaxDefaultThreads ? cpus : kMaxDefaultThreads);
}

class Pool {
public:
    explicit Pool(unsigned helpers) {
        for (unsigned i = 0; i < helpers; ++i) threads_.emplace_back([this] { serve(); });
        for (auto& t : threads_) t.detach();  // they live as long as the process
    }

    std::string run(unsigned long long n_items, const ParallelWork& work) {
        std::lock_guard<std::mutex> one_grid_at_a_time(run_lock_);
        next_.store(0);
        fault_.clear();
        const unsigned helpers = n_items > 1 ? (unsigned)std::min<unsigned long long>(threads_.size(), n_items - 1) : 0;
        {
            std::lock_guard<std::mutex> g(m_);
            work_ = &work;
            n_items_ = n_items;
            wanted_ = helpers;
            busy_ = helpers;
            ++generation_;
        }
        cv_.notify_all();
        participate(work);
        std::unique_lock<std::mutex> g(m_);
        done_cv_.wait(g, [&] { return busy_ == 0; });
        work_ = nullptr;
        return fault_;
    }

private:
    void participate(const ParallelWork& work) {
        std::string fault;
        if (!work(next_, &fault)) {
            next_.store(n_items_);  // nobody takes another item
            std::lock_guard<std::mutex> g(m_);
            if (fault_.empty()) fault_ = fault;
        }
    }

    void serve() {
        unsigned long long seen = 0;
        for (;;) {
            const ParallelWork* work;
            {
                std::unique_lock<std::mutex> g(m_);
                cv_.wait(g, [&] { return generation_ != seen && wanted_ > 0; });
                seen = generation_;
                --wanted_;
                work = work_;
            }
            participate(*work);
            std::lock_guard<std::mutex> g(m_);
            if (--busy_ == 0) done_cv_.notify_all();
        }
    }

    std::vector<std::thread> threads_;
    std::mutex run_lock_, m_;
    std::condition_variable cv_, done_cv_;
    const ParallelWork* work_ = nullptr;
    unsigned long long n_items_ = 0, generation_ = 0;
    unsigned wanted_ = 0, busy_ = 0;
    std::atomic<unsigned long long> next_{0};
    std::string fault_;
};

}  // namespace

std::string run_parallel(unsigned long long n_items, const ParallelWork& work) {
    // Never destroyed: at process exit its threads still wait on its condition variable, and
    // destroying that would block exit forever.
    static Pool* pool = new Pool(thread_count() - 1);
    return pool->run(n_items, work);
}

}  // namespace emu
