/*
 * web/page/app.js -- the gateway's page: plain JavaScript, no framework,
 * no build step. It reads /status once a second (and /tags, /frames while
 * those views are open) and shows what it reads; every figure on the page is
 * in /status or /metrics, or is a rate the page takes from two readings of a
 * /status counter. Fields the daemon does not send are shown as "-", so a
 * daemon older or newer than this page still gets a page.
 */
'use strict';

(function () {
  const PERIOD_MS = 1000;
  const HISTORY = 300;          /* sparkline samples: five minutes at 1 Hz */
  const FRAMES_KEPT = 500;      /* frame rows kept in the page per bus */
  const QUIET_S = 30;           /* a device unanswered this long is shown amber */

  const state = {
    view: 'overview',
    status: null,
    last: {},                   /* bus -> {t, requests, errors}: the previous reading */
    lastDev: {},                /* bus/device -> {timeouts, responses}: the previous reading */
    history: {},                /* bus -> [{req, err}] per second */
    tags: 'unknown',            /* 'unknown' | 'yes' | 'no': does the daemon serve /tags? */
    tagList: null,
    maps: null,                 /* GET /api/maps: the [map] virtual slaves, or null before the first answer */
    mapsAt: 0,                  /* when they were read (performance.now()) */
    token: '',                  /* the write token: in this variable only, never stored */
    login: false,               /* the gateway has users: a session is needed */
    user: null, role: 'none',   /* who the session is (GET /whoami); the cookie is HttpOnly */
    editing: null,              /* the tag being edited */
    rebuild: false,             /* rebuild the tags table once even with an editor open */
    tagSeq: null,               /* "seq" of the last /tags answer: the next asks ?since= it */
    tagClock: null,             /* the gateway's clock minus ours, ms, at that answer */
    writable: {},               /* tag -> writable, from /tags/NAME where the list leaves it out */
    results: {},                /* tag -> {ok, text}: the last write's answer */
    frames: {},                 /* bus -> {since, rows, paused} */
    frameBus: null,
    paused: false,
  };

  /* Modbus exception codes, as the application protocol names them. */
  const EXCEPTIONS = { 1: 'illegal function', 2: 'illegal data address', 3: 'illegal data value', 4: 'slave device failure',
    5: 'acknowledge', 6: 'slave busy', 10: 'gateway path unavailable', 11: 'gateway target failed to respond' };

  /* ---- small helpers ---------------------------------------------------------- */

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  window.rtugwEl = el;   /* config.js builds its view with it too */

  const num = (v) => (typeof v === 'number' && isFinite(v) ? v : null);
  const show = (v, digits) => (num(v) === null ? '-' : digits === undefined ? String(v) : v.toFixed(digits));

  function age(s) {
    if (num(s) === null) return 'never';
    if (s < 1) return (s * 1000).toFixed(0) + ' ms ago';
    if (s < 120) return s.toFixed(s < 10 ? 1 : 0) + ' s ago';
    if (s < 7200) return (s / 60).toFixed(0) + ' min ago';
    return (s / 3600).toFixed(1) + ' h ago';
  }

  function duration(s) {
    if (num(s) === null) return '';
    if (s < 60) return 'up ' + Math.floor(s) + ' s';
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    return 'up ' + (d ? d + 'd ' : '') + (d || h ? h + 'h ' : '') + m + ' min';
  }

  async function getJSON(url, opts) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 4000);
    try {
      const r = await fetch(url, Object.assign({ cache: 'no-store', signal: ctl.signal }, opts || {}));
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      return { status: r.status, ok: r.ok, body };
    } finally {
      clearTimeout(timer);
    }
  }

  /* ---- views -------------------------------------------------------------------- */

  function setView() {
    const v = (location.hash || '#overview').slice(1);
    state.view = VIEWS.includes(v) && ((v !== 'configure' && v !== 'scan') || canConfigure()) ? v : 'overview';
    for (const name of VIEWS) {
      $('view-' + name).hidden = name !== state.view;
      document.querySelector('nav a[data-view="' + name + '"]').classList.toggle('active', name === state.view);
    }
    refreshView();
  }

  const VIEWS = ['overview', 'tags', 'frames', 'configure', 'scan'];

  /* Configuration is an admin's (the API checks it; the page only offers it):
   * a session of an admin, or the write token on a gateway without users. */
  function canConfigure() {
    return state.role === 'admin' || (!state.login && !!state.token);
  }

  function refreshView() {
    $('nav-configure').hidden = !canConfigure();
    $('nav-scan').hidden = !canConfigure();   /* a scan is an admin's too (scan.js) */
    if (state.view === 'configure') return window.rtugwConfigure ? window.rtugwConfigure.refresh() : Promise.resolve();
    if (state.view === 'scan') return window.rtugwScan ? window.rtugwScan.refresh() : Promise.resolve();
    if (state.view === 'tags') return Promise.all([refreshTags(), refreshMaps()]);
    if (state.view === 'frames') return refreshFrames();
    return Promise.resolve();
  }

  /* ---- overview ------------------------------------------------------------------ */

  function errorsOf(b) {
    return (num(b.timeouts) || 0) + (num(b.crc_errors) || 0);
  }

  /* Rates from two readings of the counters; history for the sparklines. */
  function sample(buses, now) {
    for (const b of buses) {
      const prev = state.last[b.name];
      const cur = { t: now, requests: num(b.requests) || 0, errors: errorsOf(b) };
      const h = state.history[b.name] || (state.history[b.name] = []);
      if (prev && cur.requests >= prev.requests && cur.errors >= prev.errors && now > prev.t) {
        const dt = (now - prev.t) / 1000;
        b.rate = (cur.requests - prev.requests) / dt;
        b.errRate = (cur.errors - prev.errors) / dt;
        h.push({ req: b.rate, err: b.errRate });
        if (h.length > HISTORY) h.shift();
      } else if (prev) {
        h.length = 0;          /* counters went back: the daemon restarted */
      }
      state.last[b.name] = cur;
      for (const d of b.devices || []) {
        const key = b.name + '/' + d.name, was = state.lastDev[key];
        /* timed out since the last reading, and not answered once: failing now */
        d.failing = !!was && num(d.timeouts) > was.timeouts && num(d.responses) === was.responses;
        state.lastDev[key] = { timeouts: num(d.timeouts), responses: num(d.responses) };
      }
    }
  }

  function sparkline(name) {
    const h = state.history[name] || [];
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    const max = Math.max(1, ...h.map((p) => Math.max(p.req, p.err)));
    /* the span grows with the history, from half a minute to HISTORY seconds */
    const span = Math.min(HISTORY, Math.max(30, h.length));
    svg.setAttribute('viewBox', '0 0 ' + span + ' 40');
    for (const [key, cls] of [['req', 'req'], ['err', 'err']]) {
      const pts = h.map((p, i) => (span - h.length + i) + ',' + (38 - (p[key] / max) * 36).toFixed(1));
      const line = document.createElementNS(NS, 'polyline');
      line.setAttribute('points', pts.join(' '));
      line.setAttribute('class', cls);
      svg.append(line);
    }
    svg.setAttribute('aria-label', 'requests and errors per second, last ' + h.length + ' s, peak ' + max.toFixed(1));
    return el('div', { class: 'spark' }, svg,
      el('div', { class: 'legend' },
        el('span', { class: 'key-req', text: 'requests/s' }), ' and ',
        el('span', { class: 'key-err', text: 'errors/s' }), ' (timeouts + CRC), last ' +
        (h.length < 120 ? h.length + ' s' : Math.round(h.length / 6) / 10 + ' min') + '; peak ' + max.toFixed(1) + '/s'));
  }

  function deviceState(bus, d) {
    if (!bus.up) return ['port down', 'red', 'port-down'];
    if (d.backed_off) return ['backed off', 'red', 'backed-off'];
    if (d.failing || (num(d.last_ok_age_s) === null && num(d.timeouts) > 0)) return ['not answering', 'red', 'failing'];
    if (num(d.last_ok_age_s) === null) return ['not asked yet', 'grey', 'never'];
    if (d.last_ok_age_s > QUIET_S) return ['quiet', 'amber', 'quiet'];
    return ['up', 'green', 'up'];
  }

  function figure(label, value, bad) {
    return el('div', { class: 'fig' + (bad ? ' bad' : '') }, el('b', { text: value }), el('span', { text: label }));
  }

  function busCard(b) {
    const up = b.up === true;
    const lastErr = (state.history[b.name] || []).slice(-1)[0];
    const devices = (b.devices || []).map((d) => {
      const [text, colour, key] = deviceState(b, d);
      return el('tr', { 'data-device': d.name, 'data-state': key },
        el('td', { text: d.name }),
        el('td', { class: 'num', text: show(d.slave) }),
        el('td', {}, el('span', { class: 'badge ' + colour, text })),
        el('td', { text: age(d.last_ok_age_s) }),
        el('td', { class: 'num', text: show(d.timeout_ms) + ' ms' }),
        el('td', { class: 'num hide-narrow', text: show(d.requests) }),
        el('td', { class: 'num hide-narrow', text: show(d.responses) }),
        el('td', { class: 'num', text: show(d.timeouts) }));
    });
    return el('div', { class: 'card' + (up ? '' : ' down'), 'data-bus': b.name },
      el('div', { class: 'card-head' },
        el('h2', { text: b.name }),
        el('span', { class: 'badge ' + (up ? 'green' : 'red'), 'data-role': 'bus-state', text: up ? 'up' : 'down' }),
        el('span', { class: 'port muted', text: b.port || '' })),
      el('div', { class: 'figures' },
        figure('requests/s', show(b.rate, 1)),
        figure('timeouts', show(b.timeouts), lastErr && lastErr.err > 0),
        figure('CRC errors', show(b.crc_errors)),
        figure('exceptions', show(b.exceptions)),
        figure('queue', show(b.queue_depth)),
        figure('latency p50', num(b.latency_p50_ms) === null ? '-' : b.latency_p50_ms.toFixed(1) + ' ms'),
        figure('latency p99', num(b.latency_p99_ms) === null ? '-' : b.latency_p99_ms.toFixed(1) + ' ms')),
      sparkline(b.name),
      el('div', { class: 'scroll' },
        el('table', { class: 'devices' },
          el('thead', {}, el('tr', {},
            el('th', { text: 'Device' }), el('th', { text: 'Slave' }), el('th', { text: 'State' }),
            el('th', { text: 'Last answer' }), el('th', { text: 'Timeout' }),
            el('th', { class: 'hide-narrow', text: 'Requests' }), el('th', { class: 'hide-narrow', text: 'Answers' }),
            el('th', { text: 'Timeouts' }))),
          el('tbody', {}, ...devices))));
  }

  function renderOverview() {
    const s = state.status;
    const buses = s.buses || [];
    $('buses').replaceChildren(...(buses.length ? buses.map(busCard)
      : [el('p', { class: 'muted', text: 'No bus is configured.' })]));
    $('uptime').textContent = duration(s.uptime_s);
    const restart = s.restart_needed || '';
    $('restart').hidden = !restart;
    $('restart').textContent = restart ? 'Reloaded, but needs a restart for: ' + restart : '';
  }

  /* ---- tags, or the poll groups' raw values ------------------------------------------- */

  /* A daemon with tags says so in /status (each device's "tags"); asking
   * /tags of one without would only earn a 404. */
  function statusHasTags(s) {
    if (s.tags !== undefined) return true;
    return (s.buses || []).some((b) => (b.devices || []).some((d) => d.tags !== undefined));
  }

  async function refreshTags() {
    if (!state.status) return;
    if (state.tags === 'unknown' && !statusHasTags(state.status)) state.tags = 'no';
    if (state.tags !== 'no') {
      try {
        /* Only what changed since the list we have (docs/tags.md, "Polling
         * /tags cheaply"): 304 when nothing did; "full" replaces the list
         * (the first answer, a reload, a restart); else the tags listed
         * replace ours of the same name. */
        const known = state.tagSeq !== null && state.tagList;
        const r = await getJSON(known ? '/tags?since=' + state.tagSeq : '/tags',
                                known ? { headers: { 'If-None-Match': '"' + state.tagSeq + '"' } } : undefined);
        if (r.status === 404) state.tags = 'no';
        else if (r.status === 304) state.tags = 'yes';
        else if (r.ok && r.body && Array.isArray(r.body.tags)) {
          state.tags = 'yes';
          if (!known || r.body.full !== false) {
            state.tagList = r.body.tags;
          } else {
            const changed = new Map(r.body.tags.map((t) => [t.name, t]));
            state.tagList = state.tagList.map((t) => changed.get(t.name) || t);
          }
          state.tagSeq = typeof r.body.seq === 'number' ? r.body.seq : null;
          state.tagClock = num(r.body.time) !== null ? r.body.time - Date.now() : null;
        }
      } catch (e) { /* the connection badge says so */ }
    }
    renderTags();
  }

  function filterText() {
    return $('tag-filter').value.trim().toLowerCase();
  }

  function renderTags() {
    const f = filterText();
    if (state.tags === 'yes' && state.tagList && state.tagList.length) {
      $('tags-source').textContent = state.tagList.length + ' tags from /tags.';
      renderTagTables(state.tagList.filter((t) => !f || String(t.name).toLowerCase().includes(f)));
    } else {
      $('tags-source').textContent = (state.tags === 'yes' ? 'No tags are configured' : 'This gateway serves no /tags') +
        ': the poll groups\u2019 raw values from /status.';
      renderPolls(((state.status && state.status.polls) || []).filter((p) => !f || String(p.name).toLowerCase().includes(f)));
    }
  }

  function groupBy(list, key) {
    const m = new Map();
    for (const x of list) {
      const k = x[key] === undefined ? '' : String(x[key]);
      if (!m.has(k)) m.set(k, []);
      m.get(k).push(x);
    }
    return m;
  }

  function formatValue(t) {
    if (t.value === null || t.value === undefined) return '-';
    if (typeof t.text === 'string') return t.text;   /* the daemon's one formatter, as MQTT prints it */
    return String(t.value);
  }

  function tagRow(t) {
    const q = ['good', 'stale', 'bad'].includes(t.quality) ? t.quality : 'none';
    const qColour = { good: 'green', stale: 'amber', bad: 'red', none: 'grey' }[q];
    const qText = q === 'bad' && t.reason ? 'bad: ' + t.reason + (t.exception ? ' ' + t.exception : '') : (t.quality || '-');
    const writable = t.writable !== undefined ? t.writable : state.writable[t.name];
    let edit = null;
    if (writable !== false && canWrite()) {
      if (state.editing === t.name) {
        const input = el('input', { type: 'text', value: formatValue(t) === '-' ? '' : formatValue(t), 'aria-label': 'New value' });
        edit = el('form', { class: 'edit', onsubmit: (ev) => { ev.preventDefault(); writeTag(t, input.value); } },
          input, el('button', { type: 'submit', text: 'Write' }),
          el('button', { type: 'button', text: 'Cancel', onclick: () => { state.editing = null; renderTags(); } }));
        setTimeout(() => input.focus(), 0);
      } else {
        edit = el('button', { type: 'button', text: 'Edit', onclick: () => startEdit(t) });
      }
    } else if (writable === true) {
      edit = el('span', { class: 'muted', text: 'writable' });
    }
    const res = state.results[t.name];
    const msg = res ? el('span', { class: 'msg ' + (res.ok ? 'msg-ok' : res.ok === false ? 'msg-bad' : 'muted'), text: res.text }) : null;
    return el('tr', { class: 'q-' + q, 'data-tag': t.name, 'data-quality': q },
      /* a computed tag says so, its expression on hover; a bad one's why (its error) too */
      el('td', { text: t.name + (t.expr ? ' = ' : ''), title: t.expr ? 'computed: ' + t.expr +
        (t.inverse ? '; written through its inverse: ' + t.inverse : '; not writable (no inverse)') : undefined,
      'data-computed': t.expr ? 'yes' : undefined },
        t.expr ? el('span', { class: 'muted expr', text: t.expr }) : null,
        t.expr ? el('span', { class: 'badge grey computed', text: t.inverse ? 'computed, inverse' : 'computed' }) : null),
      el('td', { class: 'value num', text: formatValue(t) }),
      el('td', { text: t.unit || '' }),
      el('td', {}, el('span', { class: 'badge ' + qColour, text: qText, title: t.error || undefined })),
      el('td', { text: age(tagAge(t)) }),
      el('td', {}, edit, msg ? ' ' : null, msg));
  }

  /* A tag kept from an earlier answer (?since= lists only changes) is as
   * old as its timestamp on the gateway's clock now: its last change. */
  function tagAge(t) {
    if (num(t.timestamp) === null || state.tagClock === null) return t.age_s;
    return Math.max(0, (Date.now() + state.tagClock - t.timestamp) / 1000);
  }

  /* A list that leaves "writable" out: /tags/NAME says, once, before editing. */
  async function startEdit(t) {
    if (t.writable === undefined && state.writable[t.name] === undefined) {
      try {
        const r = await getJSON('/tags/' + encodeURIComponent(t.name));
        if (r.ok && r.body && typeof r.body.writable === 'boolean') state.writable[t.name] = r.body.writable;
      } catch (e) { /* the gateway decides when the write comes */ }
      if (state.writable[t.name] === false) {
        state.results[t.name] = { ok: false, text: 'this tag is not writable' };
        renderTags();
        return;
      }
    }
    delete state.results[t.name];
    state.editing = t.name;
    renderTags();
  }

  function renderTagTables(list) {
    /* An open editor is kept as it is, focused or not: the table is not rebuilt
     * under the user's typing (nor after a click elsewhere, which would reset
     * what was typed); it refreshes again after Write or Cancel. */
    const open = state.editing && document.querySelector('#tags tr[data-tag="' + CSS.escape(state.editing) + '"] form');
    if (open && !state.rebuild) return;
    state.rebuild = false;
    const blocks = [];
    for (const [device, tags] of groupBy(list, 'device')) {
      blocks.push(el('h3', { text: device || '(no device)' }),
        el('div', { class: 'scroll' }, el('table', { class: 'tags', 'data-device': device },
          el('thead', {}, el('tr', {}, el('th', { text: 'Tag' }), el('th', { text: 'Value' }), el('th', { text: 'Unit' }),
            el('th', { text: 'Quality' }), el('th', { text: 'Age' }), el('th', { text: '' }))),
          el('tbody', {}, ...tags.map(tagRow)))));
    }
    $('tags').replaceChildren(...(blocks.length ? blocks : [el('p', { class: 'muted', text: 'No tag matches.' })]));
  }

  /* ---- maps: the [map] virtual slaves (GET /api/maps) -------------------------------- */

  /* Their definitions change only on a reload: read again every 10 s while
   * the view is open, not every second. A daemon without the API (older)
   * answers 404, and the section stays empty. */
  async function refreshMaps() {
    if (state.maps !== null && performance.now() - state.mapsAt < 10000) return;
    state.mapsAt = performance.now();
    try {
      const r = await getJSON('/api/maps');
      state.maps = r.ok && r.body && Array.isArray(r.body.maps) ? r.body.maps : [];
    } catch (e) { /* the connection badge says so */ }
    renderMaps();
  }

  function mapEntryRow(e) {
    return el('tr', { 'data-map-tag': e.tag },
      el('td', { text: e.table }), el('td', { class: 'num', text: String(e.address) +
        (e.count > 1 ? '\u2013' + (e.address + e.count - 1) : '') }),
      el('td', { text: e.tag, title: e.expr ? 'computed: ' + e.expr : undefined },
        e.expr ? el('span', { class: 'badge grey computed', text: 'computed' }) : null),
      el('td', { text: e.type + (e.count > 1 ? ' ' + e.order : '') + (e.scale !== 1 ? ' \u00d7' + e.scale : '') }),
      el('td', { class: 'muted', text: e.expr ? e.expr + (e.inverse ? ' (inverse: ' + e.inverse + ')' : '') : '' }),
      el('td', { text: e.running === false ? 'not running' : e.writable ? 'writable' : 'read-only' }));
  }

  function renderMaps() {
    const maps = state.maps || [];
    const blocks = maps.map((m) => el('div', { class: 'map', 'data-map': m.name },
      el('h3', { text: 'Map ' + m.name + ' \u2014 unit ' + m.unit }),
      el('p', { class: 'muted', text: 'gaps: ' + m.gaps + ', not good: ' + (m.stale === 'last' ? 'last value' : 'exception 0B') +
        (m.quality_register !== null && m.quality_register !== undefined ? ', quality register ' + m.quality_register : '') }),
      el('div', { class: 'scroll' }, el('table', { class: 'map-entries' },
        el('thead', {}, el('tr', {}, el('th', { text: 'Table' }), el('th', { text: 'Address' }), el('th', { text: 'Tag' }),
          el('th', { text: 'Type' }), el('th', { text: 'Expression' }), el('th', { text: '' }))),
        el('tbody', {}, ...(m.entries || []).map(mapEntryRow))))));
    $('maps').replaceChildren(...blocks);
  }

  /* The text typed, as the JSON value the tag takes: a number, a boolean, or text. */
  function parseValue(t, text) {
    const s = text.trim();
    if (typeof t.value === 'boolean' || s === 'true' || s === 'false') {
      if (/^(true|on|1)$/i.test(s)) return true;
      if (/^(false|off|0)$/i.test(s)) return false;
    }
    if (s !== '' && !isNaN(Number(s)) && typeof t.value !== 'string') return Number(s);
    return text;
  }

  /* The write token, or a session of an operator or an admin (its cookie,
   * which the browser sends with the page's Origin). */
  function canWrite() {
    return !!state.token || state.role === 'operator' || state.role === 'admin';
  }

  async function writeTag(t, text) {
    state.results[t.name] = { ok: null, text: 'writing\u2026' };
    let result;
    try {
      const r = await getJSON('/tags/' + encodeURIComponent(t.name), {
        method: 'PUT',
        headers: Object.assign({ 'Content-Type': 'application/json' },
          state.token ? { 'Authorization': 'Bearer ' + state.token } : {}),
        body: JSON.stringify({ value: parseValue(t, text) }),
      });
      result = r.ok ? { ok: true, text: 'written' }
        : { ok: false, text: 'refused (' + r.status + '): ' + ((r.body && r.body.error) || 'no reason given') };
    } catch (e) {
      result = { ok: false, text: 'no answer from the gateway' };
    }
    state.results[t.name] = result;
    if (result.ok) state.editing = null;
    /* the answer shows in the row, rebuilt once even with the editor still open */
    if (document.activeElement) document.activeElement.blur();
    state.rebuild = true;
    renderTags();
    if (result.ok) setTimeout(refreshTags, 200);
  }

  const TABLES = { 1: 'coils', 2: 'discrete inputs', 3: 'holding registers', 4: 'input registers' };

  function pollQuality(p) {
    if (p.ok === false && num(p.failures) > 0) {
      return ['bad' + (p.exception ? ': exception ' + p.exception + ' (' + (EXCEPTIONS[p.exception] || '?') + ')' : ''),
        'red', 'bad'];
    }
    if (num(p.age_s) === null) return ['not read yet', 'grey', 'none'];
    if (num(p.interval_ms) !== null && p.age_s > 2 * p.interval_ms / 1000 + 1) return ['stale', 'amber', 'stale'];
    return ['good', 'green', 'good'];
  }

  function renderPolls(polls) {
    const blocks = [];
    for (const [device, groups] of groupBy(polls, 'device')) {
      blocks.push(el('h3', { text: device }));
      for (const p of groups) {
        const [text, colour, q] = pollQuality(p);
        const values = (p.values || []).map((v, i) =>
          el('span', { 'data-index': i }, el('i', { text: String((num(p.address) || 0) + i) }), String(v)));
        blocks.push(el('div', { class: 'card poll', 'data-poll': p.name, 'data-quality': q },
          el('div', { class: 'card-head' }, el('b', { text: p.name }),
            el('span', { class: 'badge ' + colour, text }),
            el('span', { class: 'muted', text: (TABLES[p.function] || 'fc ' + p.function) + ' ' + show(p.address) +
              (p.count > 1 ? '\u2013' + ((num(p.address) || 0) + p.count - 1) : '') + ', read ' + age(p.age_s) +
              ', every ' + show(p.interval_ms) + ' ms, ' + show(p.failures) + ' failures' })),
          el('div', { class: 'values ' + q }, ...values)));
      }
    }
    $('tags').replaceChildren(...(blocks.length ? blocks : [el('p', { class: 'muted', text: 'No poll group matches.' })]));
  }

  /* ---- frame monitor --------------------------------------------------------------- */

  const FUNCTIONS = { 1: 'read coils', 2: 'read discrete inputs', 3: 'read holding registers', 4: 'read input registers',
    5: 'write coil', 6: 'write register', 15: 'write coils', 16: 'write registers', 22: 'mask write register',
    23: 'read/write registers' };

  function list(values, n) {
    const v = values || [];
    return v.slice(0, n).join(', ') + (v.length > n ? ', \u2026' : '');
  }

  /* What `rtugw decode` says of the frame, in a line. */
  function meaning(f) {
    const d = f.decoded || {};
    if (!d.ok) return d.error === 'crc' ? 'bad CRC' : 'not a frame: ' + (d.error || '?');
    const fc = d.function & 0x7f;
    const name = FUNCTIONS[fc] || 'function ' + fc;
    if (d.request) {
      if (d.count !== undefined && d.data === undefined) return name + ' ' + d.count + ' at ' + d.address;
      if (d.value !== undefined) return name + ' ' + d.address + ' = ' + d.value;
      if (d.count !== undefined) return name + ' ' + d.count + ' at ' + d.address;
      if (d.and_mask !== undefined) return name + ' ' + d.address + ' and ' + d.and_mask + ' or ' + d.or_mask;
      return name + (d.data ? ' data ' + d.data : '');
    }
    if (d.exception !== undefined) return 'exception ' + d.exception + ' (' + (EXCEPTIONS[d.exception] || '?') + ') to ' + name;
    if (d.registers) return d.registers.length + ' registers: ' + list(d.registers, 10);
    if (d.bits) return d.bits.length + ' bits: ' + list(d.bits, 16);
    if (d.value !== undefined) return name + ' done: ' + d.address + ' = ' + d.value;
    if (d.count !== undefined) return name + ' done: ' + d.count + ' at ' + d.address;
    if (d.and_mask !== undefined) return name + ' done: ' + d.address;
    return name + (d.data ? ' data ' + d.data : '');
  }

  function clock(t) {
    if (num(t) === null) return '-';
    const d = new Date(t * 1000);
    const p = (n, w) => String(n).padStart(w, '0');
    return p(d.getHours(), 2) + ':' + p(d.getMinutes(), 2) + ':' + p(d.getSeconds(), 2) + '.' + p(d.getMilliseconds(), 3);
  }

  function busFrames(name) {
    return state.frames[name] || (state.frames[name] = { since: 0, rows: [], enabled: null, capacity: 0 });
  }

  function frameBusChoices() {
    const names = ((state.status && state.status.buses) || []).map((b) => b.name);
    const sel = $('frame-bus');
    if (sel.options.length !== names.length || names.some((n, i) => sel.options[i].value !== n)) {
      sel.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
      if (state.frameBus && names.includes(state.frameBus)) sel.value = state.frameBus;
    }
    state.frameBus = sel.value || null;
  }

  async function refreshFrames() {
    frameBusChoices();
    const name = state.frameBus;
    if (!name || state.paused) { renderFrames(); return; }
    const bf = busFrames(name);
    try {
      const r = await getJSON('/frames?bus=' + encodeURIComponent(name) + '&since=' + bf.since);
      if (r.ok && r.body) {
        const b = r.body;
        bf.enabled = b.enabled;
        bf.capacity = b.capacity;
        if (b.reset) bf.rows = [];
        const gap = (num(b.missed) || 0) + (num(b.skipped) || 0);
        if (gap && bf.since) bf.rows.push({ gap: gap + ' frames not shown: ' + (b.missed ? b.missed + ' overwritten in the ring before this page asked' : '') +
          (b.missed && b.skipped ? ', ' : '') + (b.skipped ? b.skipped + ' beyond one reply' : '') });
        for (const f of b.frames || []) bf.rows.push(f);
        if (bf.rows.length > FRAMES_KEPT) bf.rows.splice(0, bf.rows.length - FRAMES_KEPT);
        if (num(b.last) !== null) bf.since = b.last;
      }
    } catch (e) { /* the connection badge says so */ }
    renderFrames();
  }

  function frameRows(rows, slave) {
    const out = [];
    for (let i = rows.length - 1; i >= 0; i--) {
      const f = rows[i];
      if (f.gap) { if (slave === null) out.push(el('tr', { class: 'gap' }, el('td', { colspan: 5, text: f.gap }))); continue; }
      const d = f.decoded || {};
      if (slave !== null && d.slave !== slave) continue;
      const row = el('tr', { class: 'frame ' + f.dir + (d.ok ? '' : ' bad'), 'data-seq': f.seq, 'data-dir': f.dir,
        title: 'frame ' + f.seq + ': click for the decoded fields' },
        el('td', { class: 'time', text: clock(f.time) }),
        el('td', { class: 'dir', text: f.dir === 'tx' ? '\u2192 tx' : '\u2190 rx' }),
        el('td', { class: 'num', text: show(d.slave) }),
        el('td', { class: 'meaning', text: meaning(f) }),
        el('td', { class: 'hex', text: f.hex || '' }));
      out.push(row);
      if (f.open) out.push(el('tr', { class: 'more' }, el('td', { colspan: 5 }, el('pre', { text: JSON.stringify(d) }))));
      row.addEventListener('click', () => { f.open = !f.open; renderFrames(); });
    }
    return out;
  }

  function renderFrames() {
    const name = state.frameBus;
    const bf = name ? busFrames(name) : null;
    const sv = $('frame-slave').value.trim();
    const slave = sv === '' ? null : Number(sv);
    $('frame-pause').textContent = state.paused ? 'Resume' : 'Pause';
    $('frame-pause').classList.toggle('on', state.paused);
    let info = '';
    if (!bf) info = 'No bus.';
    else if (bf.enabled === false) info = 'The frame monitor is off: set [http] frame_ring (e.g. 256) and restart the gateway.';
    else info = (state.paused ? 'Paused. ' : '') + bf.rows.filter((r) => !r.gap).length + ' frames shown' +
      (bf.capacity ? '; the gateway keeps the last ' + bf.capacity + ' of this bus.' : '.');
    $('frame-info').textContent = info;
    $('frames').tBodies[0].replaceChildren(...(bf ? frameRows(bf.rows, slave) : []));
  }

  /* ---- the once-a-second loop ------------------------------------------------------ */

  function connection(ok, text) {
    const c = $('conn');
    c.className = 'badge ' + (ok ? 'green' : 'red');
    c.textContent = text;
  }

  /* ---- the login (with [user NAME] sections) ---------------------------------------- */

  function showLogin(on, error) {
    $('view-login').hidden = !on;
    document.querySelector('nav').hidden = on;
    for (const name of VIEWS) if (on) $('view-' + name).hidden = true;
    $('who').hidden = on || !state.user;
    $('logout').hidden = on || !state.user;
    $('who').textContent = state.user ? state.user + ' (' + state.role + ')' : '';
    $('login-error').hidden = !error;
    $('login-error').textContent = error || '';
    $('token-form').hidden = state.login;
    $('token-state').hidden = state.login;
    if (!on) setView();
  }

  async function whoami() {
    const r = await getJSON('/whoami');
    if (r.ok && r.body) {
      state.login = !!r.body.login_required;
      state.user = r.body.user;
      state.role = r.body.role || 'none';
    }
    return state;
  }

  async function login(ev) {
    ev.preventDefault();
    const r = await getJSON('/login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ user: $('login-user').value, password: $('login-password').value }),
    });
    $('login-password').value = '';
    if (!r.ok) {
      const wait = r.status === 429 ? ' (too many tries: wait a little)' : '';
      showLogin(true, ((r.body && r.body.error) || 'refused (' + r.status + ')') + wait);
      return;
    }
    await whoami();
    showLogin(false);
    tick();   /* the loop stopped when the form came up */
  }

  async function logout() {
    await getJSON('/logout', { method: 'POST' });
    state.user = null;
    state.role = 'none';
    showLogin(true);
  }

  async function tick() {
    if (state.login && state.role === 'none') return;   /* the login form is up: login() starts the loop again */
    try {
      const r = await getJSON('/status');
      if (r.status === 401 && state.login !== false) {
        await whoami();
        if (state.login) {
          state.role = 'none';
          state.user = null;
          showLogin(true, 'Your session has ended: log in again.');
          return;
        }
      }
      if (r.ok && r.body) {
        sample(r.body.buses || [], performance.now());
        state.status = r.body;
        renderOverview();
        connection(true, 'live');
        await refreshView();
      } else {
        connection(false, '/status answered ' + r.status);
      }
    } catch (e) {
      connection(false, 'no answer from the gateway');
    }
    setTimeout(tick, PERIOD_MS);
  }

  function start() {
    /* config.js's calls carry the page's credentials: the cookie goes by
     * itself; without users, the write token given to this page */
    window.rtugwAuth = () => (state.token ? { 'Authorization': 'Bearer ' + state.token } : {});
    window.addEventListener('hashchange', setView);
    $('tag-filter').addEventListener('input', renderTags);
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      state.token = $('token').value;
      $('token').value = '';
      $('token-forget').hidden = !state.token;
      $('token-state').textContent = state.token ? 'Write token given: writable tags can be edited (this page only; a reload forgets it).'
        : 'Writable tags can be edited once a write token is given (kept in this page only).';
      renderTags();
    });
    $('token-forget').addEventListener('click', () => {
      state.token = '';
      state.editing = null;
      $('token-forget').hidden = true;
      $('token-state').textContent = 'Writable tags can be edited once a write token is given (kept in this page only).';
      renderTags();
    });
    $('frame-bus').addEventListener('change', () => { state.frameBus = $('frame-bus').value; refreshFrames(); });
    $('frame-pause').addEventListener('click', () => { state.paused = !state.paused; if (!state.paused) refreshFrames(); else renderFrames(); });
    $('frame-clear').addEventListener('click', () => { if (state.frameBus) busFrames(state.frameBus).rows = []; renderFrames(); });
    $('frame-slave').addEventListener('input', renderFrames);
    $('login-form').addEventListener('submit', login);
    $('logout').addEventListener('click', logout);
    whoami().catch(() => null).then(() => {
      if (state.login && state.role === 'none') showLogin(true);
      else showLogin(false);
      tick();
    });
  }

  start();
})();
