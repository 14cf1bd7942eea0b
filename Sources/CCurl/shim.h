#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
// Typed, non-variadic wrappers over libcurl's variadic calls, which Swift cannot call.
#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*ccurl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                       curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_data_callback(CURL *h, CURLoption o, ccurl_data_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_xferinfo_callback(CURL *h, ccurl_xferinfo_callback v) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v); }
static inline CURLcode ccurl_easy_setopt_sockopt_callback(CURL *h, curl_sockopt_callback v) { return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, v); }
static inline CURLcode ccurl_easy_setopt_closesocket_callback(CURL *h, curl_closesocket_callback v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }
static inline CURLcode ccurl_easy_setopt_prereq_callback(CURL *h, curl_prereq_callback v) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, v); }

static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/// The CURLMsg union is awkward from Swift: read its fields here.
static inline CURLMSG ccurl_msg_kind(const CURLMsg *m) { return m->msg; }
static inline CURL *ccurl_msg_handle(const CURLMsg *m) { return m->easy_handle; }
static inline CURLcode ccurl_msg_result(const CURLMsg *m) { return m->data.result; }

#endif
