/*
 * web/page/scan.js -- the page's Scan view (admins): a scan of a bus started
 * with POST /api/scan, its progress read from GET /api/scan/BUS every half
 * second while it runs, and its results, each slave found with an Add
 * button that adds it as a device from a chosen template. Adding goes
 * through the Configure view's own call (config.js, putDevice: PUT
 * /api/devices/NAME with the file's revision), so a device added here is
 * checked, written and applied exactly as one added there, and is polled
 * live from then on. The API decides everything (the admin role, one scan
 * per bus, a polled bus refused without pause_polling): the view shows its
 * answers, refusals included.
 */
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const el = (...args) => window.rtugwEl(...args);
  const conf = () => window.rtugwConfigure;

  const scan = {
    buses: [], templates: [], result: null, timer: null,
    message: null,            /* {ok, text}: the last start or add */
    added: {},                /* slave id -> device name, added from this result */
    shown: null,              /* what the results table shows (render's key) */
  };

  async function refresh() {
    const c = conf();
    if (!c) return;
    try {
      const [b, t] = await Promise.all([c.api('GET', 'buses'), c.api('GET', 'templates')]);
      if (b.ok && b.json) scan.buses = b.json.buses || [];
      if (t.ok && t.json) scan.templates = t.json.templates || [];
      const sel = $('scan-bus'), was = sel.value, names = scan.buses.map((x) => x.name);
      if ([...sel.options].map((o) => o.value).join() !== names.join()) {
        sel.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
        if (names.includes(was)) sel.value = was;
      }
      await poll();
    } catch (e) { /* the connection badge says so */ }
  }

  /* The scan of the chosen bus now; again in 500 ms while it runs. */
  async function poll() {
    clearTimeout(scan.timer);
    const bus = $('scan-bus').value;
    if (!bus) return render();
    const r = await conf().api('GET', 'scan/' + encodeURIComponent(bus));
    scan.result = r.ok ? r.json : null;
    render();
    if (scan.result && scan.result.state === 'running' && !$('view-scan').hidden)
      scan.timer = setTimeout(poll, 500);
  }

  async function start(ev) {
    ev.preventDefault();
    const body = { bus: $('scan-bus').value, first_id: Number($('scan-first').value),
      last_id: Number($('scan-last').value), pause_polling: $('scan-pause').checked };
    const r = await conf().api('POST', 'scan', JSON.stringify(body), { 'Content-Type': 'application/json' });
    scan.message = r.ok ? null : { ok: false, text: conf().why(r) };
    scan.added = {};
    await poll();
  }

  async function add(f, row) {
    const name = row.querySelector('input').value.trim();
    const body = { slave: f.slave, template: row.querySelector('select').value };
    if (scan.buses.length > 1) body.bus = scan.result.bus;
    scan.message = await conf().putDevice(name, body);
    if (scan.message.ok) scan.added[f.slave] = name;
    render();
  }

  function render() {
    const s = scan.result;
    $('scan-progress').textContent = !s || s.state === 'none' ? 'No scan of this bus yet.'
      : s.state + ': ' + s.tried + ' of ' + s.ids + ' ids tried (' + s.first_id + '-' + s.last_id + '), ' +
        s.found.length + ' found, ' + s.elapsed_s.toFixed(1) + ' s' +
        (s.polling_paused ? '; polling paused' : '') + (s.error ? '; ' + s.error : '');
    $('scan-progress').dataset.state = s ? s.state : 'none';
    const m = scan.message;
    $('scan-message').hidden = !m;
    $('scan-message').className = m && m.ok ? 'msg-ok' : 'msg-bad';
    $('scan-message').textContent = m ? m.text : '';
    const found = s && s.found ? s.found : [];
    const templates = scan.templates.map((t) => t.name);
    /* app.js refreshes the view every few seconds: the table is rebuilt
     * only when what it shows changed, so a name being typed stays */
    const key = JSON.stringify([found, scan.added, templates]);
    if (key === scan.shown) return;
    scan.shown = key;
    $('scan-found').replaceChildren(el('div', { class: 'scroll' }, el('table', { class: 'scan-found' },
      el('thead', {}, el('tr', {}, ...['Slave', 'Functions', 'Registers', 'Exceptions', 'Add as'].map((h) =>
        el('th', { text: h })))),
      el('tbody', {}, ...found.map((f) => {
        const regs = Object.entries(f.registers || {}).map(([t, v]) =>
          Object.entries(v).map(([a, x]) => t + ' ' + a + ' = ' + x).join(', ')).join('; ');
        const exc = Object.entries(f.exceptions || {}).map(([fc, code]) => 'FC ' + fc + ': ' + code).join(', ');
        const row = el('tr', { 'data-slave': String(f.slave) },
          el('td', { class: 'num', text: String(f.slave) }),
          el('td', { text: f.functions.map((fc) => 'FC ' + fc).join(', ') || '-' }),
          el('td', { text: regs || '-' }), el('td', { text: exc || '-' }));
        if (scan.added[f.slave]) {
          row.append(el('td', { text: 'added as ' + scan.added[f.slave] }));
        } else {
          const cell = el('td', {},
            el('input', { value: 'slave' + f.slave, maxlength: '55', 'aria-label': 'Device name' }),
            el('select', { 'aria-label': 'Template' }, ...templates.map((n) => el('option', { value: n, text: n }))),
            el('button', { type: 'button', text: 'Add' }));
          cell.querySelector('button').addEventListener('click', () => add(f, row));
          row.append(cell);
        }
        return row;
      })))));
  }

  $('scan-form').addEventListener('submit', start);
  $('scan-bus').addEventListener('change', poll);
  window.rtugwScan = { refresh };
})();
