// GRANARY_ASAN: 1 when this code is built with AddressSanitizer (GCC says __SANITIZE_ADDRESS__,
// clang __has_feature), else 0 — for the few tests that measure what ASan changes (memory use,
// malloc's behaviour) and must skip those measurements under it.
#ifndef GRANARY_COMMON_SANITIZERS_H_
#define GRANARY_COMMON_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define GRANARY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRANARY_ASAN 1
#endif
#endif
#ifndef GRANARY_ASAN
#define GRANARY_ASAN 0
#endif

#endif  // GRANARY_COMMON_SANITIZERS_H_
