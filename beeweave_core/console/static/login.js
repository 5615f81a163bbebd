"use strict";
(function () {
  const {T, api, KEY, ME} = window.BW;
  const form = document.getElementById("login"), key = document.getElementById("key");
  const error = document.getElementById("login-error");
  key.focus();
  window.BW.done();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      const me = await api("GET", "/me", undefined, null, key.value.trim());
      sessionStorage.setItem(KEY, key.value.trim());
      sessionStorage.setItem(ME, JSON.stringify(me));
      const next = new URLSearchParams(location.search).get("next");
      location.href = next && next.startsWith("/ui/") && !next.startsWith("/ui/login") ? next : "/ui/memories";
    } catch (e) {
      error.textContent = e.status === 401 || e.status === 403 ? T.bad_key : T.error + ": " + e.message;
      key.select();
    }
  });
})();
