// The dispatcher's live status page (obs/status_page.html, embedded at build time): a single
// self-contained HTML file — no external scripts or fonts, it works offline — that polls
// /status.json every second and renders workers, jobs, epochs with a progress bar per task,
// the policies' latest decisions, caches and the journal's head.
#ifndef GRANARY_OBS_STATUS_PAGE_H_
#define GRANARY_OBS_STATUS_PAGE_H_

#include <string_view>

namespace granary {

extern const std::string_view kStatusPageHtml;

}  // namespace granary

#endif  // GRANARY_OBS_STATUS_PAGE_H_
