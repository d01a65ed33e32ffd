// Suanli console: progressive enhancement only. Every page works without
// this script (forms post, a confirmation page asks, pages reload through a
// <noscript> refresh); with it, confirmations are dialogs, instance status
// and cost refresh in place, and logs follow as they are written.
// Money arrives formatted by the server: this script never computes with it.
(function () {
  "use strict";

  var dialog = document.getElementById("confirm-dialog");

  // A notice ("Instance created") is for the page that follows the form:
  // drop it from the address so that a reload does not show it again.
  if (location.search.indexOf("notice=") >= 0 && window.history.replaceState) {
    var u = new URL(location.href);
    u.searchParams.delete("notice");
    history.replaceState(null, "", u.pathname + u.search + u.hash);
  }

  // Forms marked data-confirm ask in a dialog first. Without the dialog
  // (old browser) the form posts unconfirmed and the server asks instead.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      var confirmed = form.querySelector('input[name="confirmed"]');
      if (!confirmed || confirmed.value === "yes") return;
      if (!dialog || typeof dialog.showModal !== "function") return;
      ev.preventDefault();
      document.getElementById("confirm-text").textContent = form.dataset.confirm;
      document.getElementById("confirm-ok").textContent = form.dataset.confirmLabel || "Confirm";
      dialog.returnValue = "";
      dialog.addEventListener("close", function onClose() {
        dialog.removeEventListener("close", onClose);
        if (dialog.returnValue === "ok") {
          confirmed.value = "yes";
          form.submit();
        }
      });
      dialog.showModal();
    });
  });

  // poll calls fn with the JSON at url() every `every` ms while the page is
  // visible. It stops when fn returns false or the session has ended (401).
  function poll(url, every, fn) {
    function tick() {
      if (document.hidden) {
        setTimeout(tick, every);
        return;
      }
      fetch(url(), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) {
          if (r.status === 401) return { stop: true };
          return r.ok ? r.json().then(function (d) { return { data: d }; }) : {};
        })
        .then(function (res) {
          if (res.stop) return;
          if (res.data && fn(res.data) === false) return;
          setTimeout(tick, every);
        })
        .catch(function () { setTimeout(tick, every * 2); });
    }
    setTimeout(tick, every);
  }

  function setText(root, selector, value) {
    var el = root.querySelector(selector);
    if (el && value !== undefined && el.textContent !== value) el.textContent = value;
    return el;
  }

  // showInstance updates the status badge, message, cost and burn inside root.
  function showInstance(root, d) {
    var badge = setText(root, '[data-field="status"]', d.status);
    if (badge) badge.className = "badge " + d.status_class;
    setText(root, '[data-field="status_message"]', d.status_message || "");
    setText(root, '[data-field="cost_so_far"]', d.cost_so_far);
    setText(root, '[data-field="burn_rate"]', d.burn_rate);
    setText(root, '[data-field="gpu_util"]', d.gpu_util);
  }

  // The instances table.
  var table = document.querySelector("[data-live-instances]");
  if (table) {
    var q = table.dataset.liveInstances === "all" ? "?all=1" : "";
    poll(function () { return "/console/api/instances" + q; }, 3000, function (d) {
      d.instances.forEach(function (i) {
        var row = table.querySelector('tr[data-id="' + i.id + '"]');
        if (row) showInstance(row, i);
      });
      setText(document, '[data-live="total_burn"]', d.total_burn);
      setText(document, '[data-live="total_cost"]', d.total_cost);
      setText(document, '[data-live="updated"]', "Updated " + new Date().toLocaleTimeString() + ".");
    });
  }

  // One instance: its figures refresh; a status change reloads the page so
  // that the actions and events match (unless a dialog is open).
  var box = document.querySelector("[data-live-instance]");
  if (box) {
    var id = box.dataset.liveInstance;
    var status = box.dataset.status;
    var main = document.getElementById("main");
    if (status !== "destroyed") {
      poll(function () { return "/console/api/instances/" + id; }, 2000, function (d) {
        showInstance(main, d);
        if (d.status !== status && !(dialog && dialog.open)) {
          location.reload();
          return false;
        }
      });
    }
  }

  // Logs follow from where the page's tail ended.
  var pre = document.querySelector("[data-logs]");
  if (pre) {
    var logID = pre.dataset.logs;
    var offset = Number(pre.dataset.offset) || 0;
    pre.scrollTop = pre.scrollHeight;
    poll(function () { return "/console/api/instances/" + logID + "/logs?offset=" + offset; }, 1500, function (d) {
      if (d.data) {
        var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.appendChild(document.createTextNode(d.data));
        if (atBottom) pre.scrollTop = pre.scrollHeight;
        var empty = document.querySelector("[data-logs-empty]");
        if (empty) empty.remove();
      }
      offset = d.next;
      return !d.done;
    });
  }
})();
