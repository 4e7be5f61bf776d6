// The translation page: POST translate, then show the text, alternatives, attention heatmaps and
// word alignments. No framework, no build step; every URL is relative so the page works behind a prefix.
"use strict";

(() => {
  const WORD_START = "\u2581"; // sentencepiece's word-boundary marker
  const $ = (id) => document.getElementById(id);

  const form = $("translate-form");
  const source = $("source");
  const button = $("translate-button");
  const statusLine = $("status");
  const beamInput = $("beam-size");
  const nBestInput = $("n-best");
  const pairSelect = $("pair");

  let busy = false;
  let readyTimer = null;

  // ---- small DOM helpers -------------------------------------------------------------------------

  function el(tag, attrs = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role" || key === "tabindex"
               || key === "scope" || key === "title" || key === "lang" || key === "id") {
        node.setAttribute(key, String(value));
      } else node[key] = value;
    }
    for (const child of [].concat(children)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function formatScore(score) {
    return typeof score === "number" ? score.toFixed(3) : "";
  }

  // ---- model name, version and readiness ---------------------------------------------------------

  function showModel(model, extra) {
    const name = $("model-name");
    name.textContent = `${model.name} ${model.version}` + (extra ? ` (${extra})` : "");
    name.dataset.state = "ready";
    name.dataset.name = model.name;
    name.dataset.version = model.version;
  }

  function setModelState(text, state) {
    const badge = $("model-state");
    badge.textContent = text;
    badge.dataset.state = state;
  }

  const LANGUAGE_NAMES = typeof Intl.DisplayNames === "function"
    ? new Intl.DisplayNames(["en"], { type: "language" }) : null;

  function languageName(code) {
    try {
      return (LANGUAGE_NAMES && LANGUAGE_NAMES.of(code)) || code;
    } catch (err) {
      return code;
    }
  }

  let pairs = []; // GET languages: {source_lang, target_lang, model, version, ready}

  function fillPairs(list) {
    const previous = pairSelect.value;
    pairs = list;
    pairSelect.replaceChildren(...list.map((p) => el("option", {
      value: p.model,
      text: `${languageName(p.source_lang)} → ${languageName(p.target_lang)}`,
      title: `${p.model}${p.version ? " " + p.version : ""}`,
    })));
    if (list.some((p) => p.model === previous)) pairSelect.value = previous;
    pairSelect.disabled = list.length < 2;
  }

  // The chosen pair's model in the header; false while it is not ready.
  function showPair() {
    const pair = pairs.find((p) => p.model === pairSelect.value);
    if (!pair || !pair.ready) return false;
    showModel({ name: pair.model, version: pair.version }, `${pair.source_lang} → ${pair.target_lang}`);
    $("translation").lang = pair.target_lang;
    source.lang = pair.source_lang;
    setModelState("ready", "ready");
    return true;
  }

  async function loadModel() {
    clearTimeout(readyTimer);
    try {
      const response = await fetch("languages", { headers: { Accept: "application/json" } });
      if (response.ok) fillPairs((await response.json()).pairs || []);
      if (showPair()) return;
      const ready = await fetch("readyz").then((r) => r.json()).catch(() => ({}));
      const state = ready.status === "ready" ? "loading" : ready.status || "unavailable";
      $("model-name").textContent = "none yet";
      setModelState(state === "failed" ? `failed to load: ${ready.message || ""}` : `${state}…`, state);
      if (state !== "failed") readyTimer = setTimeout(loadModel, 2000);
    } catch (err) {
      $("model-name").textContent = "unknown";
      setModelState("server unreachable, retrying…", "unreachable");
      readyTimer = setTimeout(loadModel, 3000);
    }
  }

  // ---- errors ------------------------------------------------------------------------------------

  const ERROR_TITLES = {
    too_large: "The text is too long",
    unsupported_format: "This kind of file cannot be translated",
    empty: "Nothing to translate",
    glossary: "The glossary has a line it cannot read",
    validation: "Some options are not valid",
    overloaded: "The server is busy",
    not_ready: "The model is not ready yet",
    shutting_down: "The server is shutting down",
    timeout: "The translation took too long",
    unauthorized: "An API key is needed",
    forbidden: "The API key was refused",
    engine_error: "The translation engine failed",
    internal: "The server had an internal error",
  };

  function errorAdvice(code, retryAfter) {
    const wait = retryAfter ? `Try again in about ${retryAfter} s.` : "Try again in a moment.";
    switch (code) {
      case "too_large": return "Shorten the text or translate it in several parts.";
      case "unsupported_format": return "Save it in one of the formats the file field lists and try again.";
      case "validation": return "Fix the fields named below and translate again.";
      case "overloaded": return `Too many sentences are waiting to be translated. ${wait}`;
      case "not_ready": return `The model is still loading. ${wait}`;
      case "shutting_down": return `This server is stopping. ${wait}`;
      case "timeout": return "Try a shorter text, a smaller beam size, or try again later.";
      case "unauthorized":
      case "forbidden": return "Enter the server's API key under Options › More.";
      default: return "";
    }
  }

  function showError({ status, code, message, details, requestId, retryAfter }) {
    const box = $("error");
    box.dataset.code = code || "";
    box.dataset.status = status ? String(status) : "";
    $("error-title").textContent = ERROR_TITLES[code] || (status ? `Request failed (HTTP ${status})` : "Request failed");
    const advice = errorAdvice(code, retryAfter);
    $("error-message").textContent = [message, advice].filter(Boolean).join(" — ");
    const list = $("error-details");
    list.replaceChildren(...(details || []).map((d) => {
      const where = (d.loc || []).join(".") || "body";
      return el("li", {}, [el("code", { text: where }), `: ${d.msg}`]);
    }));
    $("error-id").textContent = requestId ? `Request id: ${requestId}` : "";
    box.hidden = false;
    if (code === "not_ready") loadModel();
  }

  function parseJson(raw) {
    try {
      return JSON.parse(raw);
    } catch (err) {
      return null;
    }
  }

  // An answer that is not a translation: the server's JSON error ({error, message, details, request_id}).
  function showResponseError(response, data) {
    showError({
      status: response.status,
      code: data && data.error,
      message: (data && data.message) || `The server answered HTTP ${response.status} ${response.statusText}.`,
      details: data && data.error === "validation" ? data.details : null,
      requestId: (data && data.request_id) || response.headers.get("X-Request-ID"),
      retryAfter: response.headers.get("Retry-After"),
    });
  }

  // POST to the server; null (the error shown, ``status`` cleared) when it cannot be reached at all.
  async function post(url, init, status) {
    try {
      return await fetch(url, { method: "POST", ...init });
    } catch (err) {
      showError({ message: "Could not reach the server. Check that it is running and try again." });
      status.textContent = "";
      return null;
    }
  }

  function clearError() {
    const box = $("error");
    box.hidden = true;
    box.dataset.code = "";
  }

  // ---- translating -------------------------------------------------------------------------------

  function intValue(input, fallback) {
    const value = Number.parseInt(input.value, 10);
    return Number.isFinite(value) ? value : fallback;
  }

  // "term = translation" a line (a tab works too); blank lines are skipped. Returns {entries} or {error}.
  function parseGlossary(text) {
    const entries = {};
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i += 1) {
      const line = lines[i].trim();
      if (!line) continue;
      const match = line.match(/^(.+?)\s*(?:=|\t)\s*(.+)$/);
      if (!match) return { error: `Line ${i + 1} ("${line}") has no "=": write it as term = translation.` };
      entries[match[1].trim()] = match[2].trim();
    }
    return { entries };
  }

  function buildRequest(glossary) {
    const markup = $("format").value; // html, xml, markdown: one translation, no attention (the tags carry the alignment)
    const html = markup !== "text";
    const attention = !html && $("show-attention").checked;
    return {
      text: source.value,
      format: markup,
      beam_size: intValue(beamInput, 4),
      n_best: html ? 1 : intValue(nBestInput, 1),
      return_attention: attention,
      return_scores: $("show-scores").checked,
      split_sentences: $("split-sentences").checked,
      ...(pairSelect.value ? { model: pairSelect.value } : {}),
      ...(Object.keys(glossary).length ? { glossary } : {}),
    };
  }

  async function translate() {
    if (busy) return;
    if (!source.value.trim()) {
      showError({ code: "empty", message: "There is nothing to translate: type a text first." });
      source.focus();
      return;
    }
    const glossary = parseGlossary($("glossary").value);
    if (glossary.error) {
      showError({ code: "glossary", message: glossary.error });
      $("glossary").focus();
      return;
    }
    const body = buildRequest(glossary.entries);
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const key = $("api-key").value.trim();
    if (key) headers["X-API-Key"] = key;

    busy = true;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    form.setAttribute("aria-busy", "true");
    statusLine.textContent = "Translating…";
    clearError();
    const started = performance.now();
    try {
      const response = await post("translate", { headers, body: JSON.stringify(body) }, statusLine);
      if (!response) return;
      const raw = await response.text();
      const elapsed = performance.now() - started;
      const data = parseJson(raw);
      if (!response.ok || !data) {
        showResponseError(response, data);
        statusLine.textContent = "";
        return;
      }
      render(data, body, elapsed);
      statusLine.textContent = `Translated in ${Math.round(elapsed)} ms.`;
    } finally {
      busy = false;
      button.disabled = false;
      button.removeAttribute("aria-busy");
      form.removeAttribute("aria-busy");
    }
  }

  // ---- translating a file -----------------------------------------------------------------------

  // POST translate/document with the chosen file, the pair, glossary and key of the form above; the answer is
  // the file translated, offered as a download under its own name.
  async function translateFile() {
    if (busy) return;
    const input = $("file");
    const file = input.files && input.files[0];
    if (!file) {
      showError({ code: "empty", message: "There is no file to translate: choose one first." });
      input.focus();
      return;
    }
    const glossary = parseGlossary($("glossary").value);
    if (glossary.error) {
      showError({ code: "glossary", message: glossary.error });
      return;
    }
    const body = new FormData();
    body.append("file", file, file.name);
    if (pairSelect.value) body.append("model", pairSelect.value);
    if (Object.keys(glossary.entries).length) body.append("glossary", JSON.stringify(glossary.entries));
    const headers = {};
    const key = $("api-key").value.trim();
    if (key) headers["X-API-Key"] = key;
    const fileButton = $("file-button");
    const fileStatus = $("file-status");
    busy = true;
    fileButton.disabled = true;
    fileButton.setAttribute("aria-busy", "true");
    fileStatus.textContent = `Translating ${file.name}…`;
    $("file-result").hidden = true;
    clearError();
    const started = performance.now();
    try {
      const response = await post("translate/document", { headers, body }, fileStatus);
      if (!response) return;
      if (!response.ok) {
        showResponseError(response, parseJson(await response.text()));
        fileStatus.textContent = "";
        return;
      }
      const translated = await response.blob();
      const link = $("file-link");
      if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
      link.href = URL.createObjectURL(translated);
      link.download = file.name;
      link.textContent = `Download ${file.name} (translated)`;
      $("file-result").hidden = false;
      fileStatus.textContent = `Translated in ${Math.round(performance.now() - started)} ms.`;
      link.focus();
    } finally {
      busy = false;
      fileButton.disabled = false;
      fileButton.removeAttribute("aria-busy");
    }
  }

  // ---- rendering the answer ----------------------------------------------------------------------

  function render(data, request, elapsed) {
    const result = data.translations[0];
    $("translation").textContent = result.text;
    $("copy-status").textContent = "";
    const timing = $("timing");
    timing.textContent = `${Math.round(elapsed)} ms`;
    timing.dataset.ms = elapsed.toFixed(1);
    if (data.model) {
      $("result-model").textContent = `${data.model.name} ${data.model.version}`;
    }
    const hasScore = typeof result.score === "number";
    $("score-line").hidden = !hasScore;
    $("score").textContent = hasScore ? formatScore(result.score) : "";
    $("truncated").hidden = !result.truncated;

    renderAlternatives(result, request);
    renderAttention(result, request);
    $("result").hidden = false;
  }

  function renderAlternatives(result, request) {
    const block = $("alternatives-block");
    const list = $("alternatives");
    list.replaceChildren();
    if (request.n_best <= 1) {
      block.hidden = true;
      return;
    }
    const entries = [{ text: result.text, score: result.score, best: true }, ...(result.alternatives || [])];
    for (const entry of entries) {
      const item = el("li", { class: entry.best ? "alternative best" : "alternative" }, [
        el("span", { class: "alt-text", text: entry.text }),
      ]);
      if (typeof entry.score === "number") {
        item.append(el("span", { class: "alt-score", text: formatScore(entry.score), title: "length-normalised log-probability" }));
      }
      if (entry.best) item.append(el("span", { class: "alt-tag", text: "best" }));
      list.append(item);
    }
    if (!result.alternatives || !result.alternatives.length) {
      list.append(el("li", { class: "alternative none", text: "No other distinct hypothesis." }));
    }
    block.hidden = false;
  }

  let shownAttention = null; // the last answer's sentences, drawn again when the axes change

  function heatmapUnit() {
    return $("heatmap-pieces").checked ? "pieces" : "words";
  }

  function renderAttention(result, request) {
    const block = $("attention-block");
    const views = $("attention-views");
    views.replaceChildren();
    shownAttention = null;
    if (!request.return_attention || !result.attention) {
      block.hidden = true;
      return;
    }
    const sentences = result.sentences && result.sentences.length
      ? result.sentences
      : [{ source: request.text, text: result.text, attention: result.attention, alignment: result.alignment }];
    shownAttention = sentences;
    drawSentences();
    block.hidden = false;
  }

  function drawSentences() {
    const views = $("attention-views");
    views.replaceChildren();
    if (!shownAttention) return;
    const unit = heatmapUnit();
    shownAttention.forEach((sentence, index) => {
      views.append(sentenceView(sentence, index, shownAttention.length, unit));
    });
  }

  // Words from sentencepiece pieces, as the server groups them: a word starts at a piece with U+2581.
  function words(pieces) {
    const list = [];
    const ofPiece = [];
    pieces.forEach((piece, i) => {
      if (i === 0 || piece.startsWith(WORD_START)) list.push({ text: "", pieces: [] });
      const word = list[list.length - 1];
      word.text += piece;
      word.pieces.push(i);
      ofPiece.push(list.length - 1);
    });
    for (const word of list) word.text = word.text.split(WORD_START).join("") || word.text;
    return { list, ofPiece };
  }

  // weights[t][s] between words: attention summed over a source word's pieces, averaged over a target word's.
  function wordWeights(attention, sourceWords, targetWords) {
    const out = targetWords.list.map(() => new Array(sourceWords.list.length).fill(0));
    attention.weights.forEach((row, t) => {
      const tw = targetWords.ofPiece[t];
      row.forEach((w, s) => {
        out[tw][sourceWords.ofPiece[s]] += w / targetWords.list[tw].pieces.length;
      });
    });
    return out;
  }

  function sentenceView(sentence, index, count, unit) {
    const attention = sentence.attention || { source_tokens: [], target_tokens: [], weights: [] };
    const section = el("section", {
      class: "sentence-view",
      "data-sentence": index,
      "aria-label": `Sentence ${index + 1} of ${count}`,
    });
    const heading = el("h4", {}, [
      count > 1 ? `Sentence ${index + 1}: ` : "",
      el("span", { class: "sentence-source", text: sentence.source }),
      " → ",
      el("span", { class: "sentence-target", text: sentence.text }),
    ]);
    section.append(heading);
    if (typeof sentence.score === "number") {
      section.append(el("p", { class: "hint", text: `score ${formatScore(sentence.score)}` }));
    }
    if (sentence.truncated) {
      section.append(el("p", { class: "warning", text: "This sentence was too long for the model and was cut." }));
    }
    const sourceWords = words(attention.source_tokens);
    const targetWords = words(attention.target_tokens);
    const grid = unit === "pieces"
      ? { unit, rows: attention.target_tokens, cols: attention.source_tokens, weights: attention.weights }
      : {
        unit,
        rows: targetWords.list.map((w) => w.text),
        cols: sourceWords.list.map((w) => w.text),
        weights: attention.weights.length ? wordWeights(attention, sourceWords, targetWords) : [],
      };
    const table = heatmap(grid, index);
    section.append(alignmentView(sentence, attention, sourceWords, targetWords, table));
    section.append(el("div", { class: "heatmap-scroll", tabindex: 0, role: "region",
      "aria-label": `Attention heatmap, sentence ${index + 1}` }, [table]));
    const noun = unit === "pieces" ? "pieces" : "words";
    section.append(el("p", { class: "hint heatmap-note", "aria-hidden": "true",
      text: `${table.dataset.rows} target ${noun} × ${table.dataset.cols} source ${noun}` }));
    return section;
  }

  function alignmentView(sentence, attention, sourceWords, targetWords, table) {
    const weights = attention.weights.length ? wordWeights(attention, sourceWords, targetWords) : [];
    const links = new Map(); // target word -> source words the server aligned it to
    for (const link of sentence.alignment || []) {
      if (!links.has(link.target)) links.set(link.target, new Set());
      links.get(link.target).add(link.source);
    }
    const sourceLine = el("p", { class: "words source-words" }, [el("span", { class: "words-label", text: "Source" })]);
    const sourceSpans = sourceWords.list.map((word, s) => {
      const span = el("span", { class: "word source-word", "data-word": s, text: word.text });
      sourceLine.append(span, " ");
      return span;
    });
    const targetLine = el("p", { class: "words target-words" }, [el("span", { class: "words-label", text: "Target" })]);
    const container = el("div", { class: "alignment" }, [targetLine, sourceLine]);

    const clear = () => {
      for (const span of sourceSpans) {
        span.classList.remove("linked");
        span.style.removeProperty("--w");
        span.removeAttribute("data-weight");
      }
      for (const span of targetLine.querySelectorAll(".target-word.active")) span.classList.remove("active");
      for (const node of table.querySelectorAll(".highlight")) node.classList.remove("highlight");
      container.classList.remove("focused");
    };
    const show = (t, span) => {
      clear();
      container.classList.add("focused");
      span.classList.add("active");
      const row = weights[t] || [];
      sourceSpans.forEach((s, i) => {
        const w = row[i] || 0;
        s.style.setProperty("--w", w.toFixed(3));
        s.dataset.weight = w.toFixed(3);
      });
      for (const s of links.get(t) || []) if (sourceSpans[s]) sourceSpans[s].classList.add("linked");
      // the heatmap's rows and columns are words or pieces: a word lights its own row, or its pieces' rows
      const inWords = table.dataset.unit === "words";
      const rowsOf = (word) => (inWords ? [t] : word.pieces);
      for (const row of rowsOf(targetWords.list[t])) {
        const tr = table.tBodies[0].rows[row];
        if (tr) tr.classList.add("highlight");
      }
      for (const s of links.get(t) || []) {
        const cols = inWords ? [s] : (sourceWords.list[s] || { pieces: [] }).pieces;
        for (const col of cols) {
          const th = table.tHead.rows[0].cells[col + 1];
          if (th) th.classList.add("highlight");
        }
      }
    };

    targetWords.list.forEach((word, t) => {
      const linked = [...(links.get(t) || [])].map((s) => sourceWords.list[s] && sourceWords.list[s].text);
      const span = el("span", {
        class: "word target-word",
        "data-word": t,
        tabindex: 0,
        role: "button",
        "aria-label": `${word.text}: aligned to ${linked.filter(Boolean).join(", ") || "no source word"}`,
        text: word.text,
      });
      span.addEventListener("mouseenter", () => show(t, span));
      span.addEventListener("focus", () => show(t, span));
      span.addEventListener("mouseleave", clear);
      span.addEventListener("blur", clear);
      targetLine.append(span, " ");
    });
    return container;
  }

  // grid: {unit: "words" | "pieces", rows: target labels, cols: source labels, weights[row][col]}
  function heatmap(grid, index) {
    const rows = grid.rows.length;
    const cols = grid.cols.length;
    const classes = ["heatmap"];
    if (cols > 24) classes.push("compact");
    else classes.push("fill"); // few columns: the table spreads over the width it has
    if (grid.unit === "words" && cols <= 12) classes.push("flat-labels");
    const table = el("table", {
      class: classes.join(" "),
      "data-sentence": index,
      "data-unit": grid.unit,
      "data-rows": rows,
      "data-cols": cols,
    });
    const noun = grid.unit === "pieces" ? "pieces" : "words";
    table.append(el("caption", { class: "visually-hidden",
      text: `Attention of sentence ${index + 1}: ${rows} target ${noun} (rows) × ${cols} source ${noun} (columns)` }));
    const headRow = el("tr", {}, [el("th", { scope: "col", class: "corner", text: "target ↓ source →" })]);
    grid.cols.forEach((label, s) => {
      headRow.append(el("th", { scope: "col", class: "source-label", "data-col": s, title: label },
        [el("span", { text: label })]));
    });
    table.append(el("thead", {}, [headRow]));
    const body = el("tbody");
    grid.weights.forEach((row, t) => {
      const tr = el("tr", { class: "heatmap-row", "data-row": t }, [
        el("th", { scope: "row", class: "target-label", title: grid.rows[t], text: grid.rows[t] }),
      ]);
      row.forEach((w, s) => {
        const label = `${grid.rows[t]} → ${grid.cols[s]}: ${w.toFixed(2)}`;
        const td = el("td", {
          class: w >= 0.6 ? "cell strong" : "cell",
          "data-row": t,
          "data-col": s,
          "data-weight": w,
          title: label,
        }, [w >= 0.005 ? w.toFixed(2).replace(/^0/, "") : ""]);
        td.style.setProperty("--w", Math.min(1, Math.max(0, w)).toFixed(3));
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(body);
    return table;
  }

  // ---- copying the translation -------------------------------------------------------------------

  async function copyTranslation() {
    const text = $("translation").textContent;
    const done = $("copy-status");
    let copied = false;
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        copied = true;
      } catch (err) {
        copied = false;
      }
    }
    if (!copied) { // plain http on another host: the old way still works from a click
      const area = el("textarea", { class: "visually-hidden", readOnly: true, value: text });
      document.body.append(area);
      area.select();
      try {
        copied = document.execCommand("copy");
      } catch (err) {
        copied = false;
      }
      area.remove();
    }
    done.textContent = copied ? "Copied" : "Could not copy: select the text and copy it by hand";
    done.dataset.state = copied ? "copied" : "failed";
  }

  // ---- wiring ------------------------------------------------------------------------------------

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    translate();
  });
  source.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translate();
    }
  });
  const countChars = () => { $("char-count").textContent = String([...source.value].length); };
  source.addEventListener("input", countChars);
  beamInput.addEventListener("input", () => {
    const beam = intValue(beamInput, 16);
    nBestInput.max = String(Math.max(1, Math.min(16, beam)));
  });
  $("copy-button").addEventListener("click", copyTranslation);
  $("file-form").addEventListener("submit", (event) => {
    event.preventDefault();
    translateFile();
  });
  for (const id of ["heatmap-words", "heatmap-pieces"]) $(id).addEventListener("change", drawSentences);
  pairSelect.addEventListener("change", () => {
    if (!showPair()) loadModel();
  });
  countChars();
  loadModel();
})();
