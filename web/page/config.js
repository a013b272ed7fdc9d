/*
 * web/page/config.js -- the page's Configure view (admins): the running
 * devices and templates, a device added from a template, a template's tag
 * file uploaded with a preview of its errors by line and column, then
 * applied. Every call goes through /api/ (docs/api.md), as a script's would,
 * so the page can do nothing the API does not check: the admin role, the
 * revision (If-Match: a change made from a stale view gets 409 and is shown,
 * never forced), the loader's errors. app.js owns the views and the login;
 * it calls window.rtugwConfigure.refresh() when this view opens and gives
 * its credentials through window.rtugwAuth (the session cookie is sent by
 * the browser; without users, the write token as a bearer).
 */
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);

  const conf = {
    devices: [], templates: [], buses: [],
    csv: null,                  /* {template, text, name, checked: {valid, rows, errors, error_count}} */
    message: null,              /* {ok, text}: the last change's answer */
  };

  /* app.js's element builder (one copy for the page) */
  const el = (...args) => window.rtugwEl(...args);

  /* One call to /api/: the credentials app.js holds, a JSON answer (or text). */
  async function api(method, path, body, headers) {
    const auth = window.rtugwAuth ? window.rtugwAuth() : {};
    const r = await fetch('/api/' + path, {
      method, cache: 'no-store', body,
      headers: Object.assign({}, auth, headers || {}),
    });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { json = null; }
    return { status: r.status, ok: r.ok, json, text, etag: (r.headers.get('ETag') || '').replace(/"/g, '') };
  }

  function why(r) {
    if (r.status === 409) return 'the configuration changed meanwhile (409): look again and redo the change';
    if (r.status === 401 || r.status === 403) return 'refused (' + r.status + '): configuration needs an admin';
    if (r.json && Array.isArray(r.json.errors) && r.json.errors.length) {
      return r.json.errors.map((e) => (typeof e === 'string' ? e : 'line ' + e.line + ': ' + e.message)).join('; ');
    }
    return 'refused (' + r.status + '): ' + ((r.json && r.json.error) || r.text || 'no reason given');
  }

  async function refresh() {
    try {
      const [d, t, b] = await Promise.all([api('GET', 'devices'), api('GET', 'templates'), api('GET', 'buses')]);
      if (d.ok && d.json) conf.devices = d.json.devices || [];
      if (t.ok && t.json) conf.templates = t.json.templates || [];
      if (b.ok && b.json) conf.buses = b.json.buses || [];
    } catch (e) { /* the connection badge says so */ }
    render();
  }

  function table(cls, heads, rows) {
    return el('div', { class: 'scroll' }, el('table', { class: cls },
      el('thead', {}, el('tr', {}, ...heads.map((h) => el('th', { text: h })))),
      el('tbody', {}, ...rows)));
  }

  function options(select, names) {
    const was = select.value;
    select.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
    if (names.includes(was)) select.value = was;
  }

  function render() {
    $('conf-devices').replaceChildren(table('conf-devices', ['Device', 'Bus', 'Slave', 'Template', 'Tags'],
      conf.devices.map((d) => el('tr', { 'data-device': d.name },
        el('td', { text: d.name }), el('td', { text: d.bus }), el('td', { class: 'num', text: String(d.slave) }),
        el('td', { text: d.template || '-' }), el('td', { class: 'num', text: String(d.tags) })))));
    $('conf-templates').replaceChildren(table('conf-templates', ['Template', 'Tag file', 'Devices', ''],
      conf.templates.map((t) => el('tr', { 'data-template': t.name },
        el('td', { text: t.name }), el('td', { text: t.tags_file }), el('td', { class: 'num', text: String(t.devices) }),
        el('td', {}, el('a', { href: '/api/templates/' + encodeURIComponent(t.name) + '/csv', download: t.name + '.csv',
          text: 'Export CSV' }))))));
    const names = conf.templates.map((t) => t.name);
    options($('conf-add-template'), names);
    options($('conf-csv-template'), names);
    options($('conf-add-bus'), conf.buses.map((b) => b.name));
    const m = conf.message;
    $('conf-message').hidden = !m;
    $('conf-message').className = m && m.ok ? 'msg-ok' : 'msg-bad';
    $('conf-message').textContent = m ? m.text : '';
    renderCsv();
  }

  /* The upload's preview: the loader's errors, one row each, by line and column. */
  function renderCsv() {
    const c = conf.csv, out = $('conf-csv-result');
    $('conf-csv-apply').disabled = !(c && c.checked && c.checked.valid);
    if (!c || !c.checked) { out.replaceChildren(); return; }
    const k = c.checked;
    if (k.valid) {
      out.replaceChildren(el('p', { class: 'msg-ok', 'data-valid': 'true',
        text: c.name + ': ' + k.rows + ' rows, no error. Apply writes it and applies it live.' }));
      return;
    }
    const errs = k.errors || [];
    out.replaceChildren(
      el('p', { class: 'msg-bad', 'data-valid': 'false',
        text: c.name + ': ' + (k.error_count || errs.length) + ' errors' +
          (k.error_count > errs.length ? ' (the first ' + errs.length + ' shown)' : '') + '; nothing was applied.' }),
      table('csv-errors', ['Line', 'Column', 'Error'], errs.map((e) =>
        el('tr', { 'data-line': e.line, 'data-column': e.column },
          el('td', { class: 'num', text: String(e.line) }), el('td', { class: 'num', text: String(e.column) }),
          el('td', { text: e.message })))));
  }

  /* Add a device: the file's revision now, then PUT /api/devices/NAME with
   * it. The one way the page adds a device (the Scan view calls it too):
   * {ok, text} to show. */
  async function putDevice(name, body) {
    try {
      const cur = await api('GET', 'config');
      const r = cur.ok ? await api('PUT', 'devices/' + encodeURIComponent(name), JSON.stringify(body),
        { 'Content-Type': 'application/json', 'If-Match': cur.json.revision }) : cur;
      return r.ok ? { ok: true, text: 'Device ' + name + ' added' + (r.json.restart_needed
        ? '; needs a restart for: ' + r.json.restart_needed : ', live.') } : { ok: false, text: why(r) };
    } catch (e) {
      return { ok: false, text: 'no answer from the gateway' };
    }
  }

  async function addDevice(ev) {
    ev.preventDefault();
    const name = $('conf-add-name').value.trim();
    const body = { slave: Number($('conf-add-slave').value), template: $('conf-add-template').value };
    if (conf.buses.length > 1) body.bus = $('conf-add-bus').value;
    conf.message = await putDevice(name, body);
    if (conf.message.ok) $('conf-add-name').value = '';
    refresh();
  }

  /* The chosen file, checked at once (a dry run): the errors show before anything is applied. */
  async function checkCsv() {
    const f = $('conf-csv-file').files[0];
    if (!f) return;
    const template = $('conf-csv-template').value;
    conf.csv = { template, name: f.name, text: await f.text(), checked: null };
    try {
      const r = await api('PUT', 'templates/' + encodeURIComponent(template) + '/csv?dry_run=1', conf.csv.text,
        { 'Content-Type': 'text/csv' });
      conf.csv.checked = r.json && typeof r.json.valid === 'boolean' ? r.json
        : { valid: false, errors: [{ line: 0, column: 0, message: why(r) }], error_count: 1 };
    } catch (e) {
      conf.csv.checked = { valid: false, errors: [{ line: 0, column: 0, message: 'no answer from the gateway' }] };
    }
    conf.message = null;
    render();
  }

  /* Apply: the tag file's revision (ETag of its GET), then the PUT with it. */
  async function applyCsv() {
    const c = conf.csv;
    if (!c || !c.checked || !c.checked.valid) return;
    const path = 'templates/' + encodeURIComponent(c.template) + '/csv';
    try {
      const cur = await api('GET', path);
      const r = cur.ok ? await api('PUT', path, c.text, { 'Content-Type': 'text/csv', 'If-Match': cur.etag }) : cur;
      conf.message = r.ok ? { ok: true, text: c.name + ' applied to template ' + c.template + ': ' + r.json.rows +
        ' rows' + (r.json.restart_needed ? '; needs a restart for: ' + r.json.restart_needed : ', live.') }
        : { ok: false, text: why(r) };
      if (r.ok) { conf.csv = null; $('conf-csv-file').value = ''; }
    } catch (e) {
      conf.message = { ok: false, text: 'no answer from the gateway' };
    }
    refresh();
  }

  $('conf-add-form').addEventListener('submit', addDevice);
  $('conf-csv-file').addEventListener('change', checkCsv);
  $('conf-csv-template').addEventListener('change', () => { if (conf.csv) checkCsv(); });
  $('conf-csv-apply').addEventListener('click', applyCsv);
  window.rtugwConfigure = { refresh, api, why, putDevice };   /* scan.js adds its devices through these */
})();
